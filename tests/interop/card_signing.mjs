// Verifies or signs an Agent Card with @a2a-js/sdk, for tests/test_card_signing.py.
// Reads {"mode": "verify"|"sign", "card", "alg", "publicKey"|"privateKey", "kid"}
// on stdin; writes {"canonical", "verified", "error", "card"} on stdout.
import { readFileSync } from "node:fs";
import * as jose from "jose";
import {
  canonicalizeAgentCard,
  generateAgentCardSignature,
  verifyAgentCardSignature,
} from "@a2a-js/sdk";

const request = JSON.parse(readFileSync(0, "utf8"));
// The SDK reports each failed signature with console.debug; stdout is ours.
console.debug = () => {};
const out = { canonical: canonicalizeAgentCard(request.card) };
try {
  if (request.mode === "verify") {
    const key = await jose.importSPKI(request.publicKey, request.alg);
    await verifyAgentCardSignature(async () => key)(request.card);
    out.verified = true;
  } else {
    const key = await jose.importPKCS8(request.privateKey, request.alg);
    const header = { alg: request.alg, kid: request.kid, typ: "JOSE" };
    out.card = await generateAgentCardSignature(key, header)(request.card);
  }
} catch (error) {
  out.verified = false;
  out.error = String(error);
}
process.stdout.write(JSON.stringify(out));
