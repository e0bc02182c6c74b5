"""Agent Card signatures (spec 8.4): the signed payload, signing, verifying.

A signature is a JWS (RFC 7515) whose payload is the card without its
``signatures``, with the values proto3 field presence leaves out removed
(spec 8.4.1 rule 1, see :func:`signed_payload`), in its RFC 8785 (JCS)
canonical form. The payload is not carried: a verifier rebuilds it from the
card it received. Canonicalisation is the ``rfc8785`` package's, the JWS is
PyJWT's; nothing here does I/O, so fetching cards and key sets is the
caller's business.
"""

from __future__ import annotations

from .keys import SIGNING_ALGORITHMS, CardKeys, CardSignatureError, SigningAlgorithm
from .payload import presence_normalised, signed_payload
from .signer import CardSigner
from .verify import VerifiedSignature, signature_headers, verify_card

__all__ = [
    "SIGNING_ALGORITHMS",
    "CardKeys",
    "CardSignatureError",
    "CardSigner",
    "SigningAlgorithm",
    "VerifiedSignature",
    "presence_normalised",
    "signature_headers",
    "signed_payload",
    "verify_card",
]
