"""HPACK for the mended HTTP/2 connection: hpack's own blocks, with less Python per block.

hpack 4.2 encodes and decodes every header field in Python, each field with
a ``log.debug`` call, its own integer coding, a table lookup and a new
``HeaderTuple``; the encoder searches its whole dynamic table, one entry at a
time, for every field it sends. For a unary gRPC call that is about 4,000 of
the 37,000 bytecodes a2a-trio runs to answer it, yet the blocks barely vary:
an answer's heads and trailers are the same from one call to the next, and
a client's request heads are mostly fields its encoder indexed before.

- :class:`RememberingEncoder` keeps, for each header list it encoded without
  changing its table, the block it made, and hands that block out again for
  the same list while the table has not changed since (:class:`CountedTable`
  counts each change). A block that adds to the table, carries a table size
  update, or holds a field that must never be indexed is not kept. So each
  block sent is byte for byte hpack's.
- :class:`QuickDecoder` decodes a field indexed in one byte (index 1 to 126,
  what a client's encoder sends for a field it indexed before) by a tuple
  lookup, and hands every other representation to hpack's own methods: the
  same headers, the same table, the same errors.

Both skip hpack's per-field DEBUG lines where they take their shortcut.
:func:`install` puts them in a connection's :class:`h2.connection.H2Connection`
(the mended protocol calls it for each connection it makes), on the hpack
releases they were compared with (:data:`CHECKED_VERSIONS`, by the equivalence
tests in tests/test_h2_hpack.py); on any other release hpack's own stay.
docs/upstream/hpack-repeated-blocks.md writes the cost up for hpack.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from functools import cache
from typing import Any

import hpack
from hpack import Decoder, Encoder, HeaderTuple, OversizedHeaderListError
from hpack.exceptions import HPACKDecodingError
from hpack.hpack import _unicode_if_needed
from hpack.table import HeaderTable

__all__ = [
    "CHECKED_VERSIONS",
    "CountedTable",
    "QuickDecoder",
    "RememberingEncoder",
    "install",
]

#: The hpack releases whose ``Encoder`` and ``Decoder`` these classes match.
CHECKED_VERSIONS = ("4.2.0",)
#: The blocks an encoder or a decoder keeps (a connection's calls repeat a few).
REMEMBERED = 32
#: The largest block kept: a client's many big blocks must not hold memory.
REMEMBERED_BYTES = 1024

_log = logging.getLogger("a2a_trio.server")

#: The static table's entries as the decoder returns them, by their index (1 to 61).
_STATIC: tuple[Any, ...] = (None, *(HeaderTuple(*entry) for entry in HeaderTable.STATIC_TABLE))
_STATIC_LAST = HeaderTable.STATIC_TABLE_LENGTH


class CountedTable(HeaderTable):
    """hpack's header table, counting its changes: each entry added, each resize."""

    changes = 0

    def add(self, name: bytes, value: bytes) -> None:
        self.changes += 1
        super().add(name, value)

    @property
    def maxsize(self) -> int:
        return self._maxsize

    @maxsize.setter
    def maxsize(self, newmax: int) -> None:
        self.changes += 1
        HeaderTable.maxsize.fset(self, newmax)  # type: ignore[attr-defined]


class RememberingEncoder(Encoder):
    """hpack's encoder, handing out again the block of a header list it encoded
    before, while its table is as it was then (module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.header_table: CountedTable = CountedTable()
        #: Header list -> (the table's changes when its block was made, the block).
        self._blocks: dict[tuple[Any, ...], tuple[int, bytes]] = {}

    def encode(self, headers: Any, huffman: bool = True) -> bytes:
        if isinstance(headers, dict) or not huffman:
            return super().encode(headers, huffman)
        fields = tuple(headers)
        for field in fields:
            # A HeaderTuple (NeverIndexedHeaderTuple: a secret) equals a plain
            # tuple of the same bytes: only plain pairs are keys.
            if type(field) is not tuple or len(field) != 2:
                return super().encode(fields, huffman)
        table = self.header_table
        try:
            known = self._blocks.get(fields)
        except TypeError:  # something unhashable: hpack's own error, if any
            return super().encode(fields, huffman)
        if known is not None and known[0] == table.changes:
            return known[1]
        before, resized = table.changes, table.resized
        block = super().encode(fields, huffman)
        if table.changes == before and not resized and len(block) <= REMEMBERED_BYTES:
            if len(self._blocks) >= REMEMBERED:
                self._blocks.clear()
            self._blocks[fields] = (before, block)
        return block


class QuickDecoder(Decoder):
    """hpack's decoder, handing out again the headers of a block it decoded before
    while its table and limits are as they were, and taking a field indexed in one
    byte without hpack's calls (module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.header_table: CountedTable = CountedTable()
        #: Block -> ((the table's changes, the two limits) when decoded, its headers).
        self._blocks: dict[bytes, tuple[tuple[int, int, int], list[HeaderTuple]]] = {}

    def decode(self, data: bytes, raw: bool = False) -> Iterable[HeaderTuple]:
        if not raw or type(data) is not bytes:
            return super().decode(data, raw)
        table = self.header_table
        state = (table.changes, self.max_header_list_size, self.max_allowed_table_size)
        known = self._blocks.get(data)
        if known is not None and known[0] == state:
            return list(known[1])
        headers = self._fields(data)
        if table.changes == state[0] and len(data) <= REMEMBERED_BYTES:
            if len(self._blocks) >= REMEMBERED:
                self._blocks.clear()
            self._blocks[data] = (state, headers)
            return list(headers)
        return headers

    def _fields(self, data: bytes) -> list[HeaderTuple]:
        """hpack's ``decode(data, raw=True)``, a field indexed in one byte taken directly."""
        entries = self.header_table.dynamic_entries
        limit = self.max_header_list_size
        headers: list[HeaderTuple] = []
        inflated = 0
        at, end = 0, len(data)
        view: memoryview | None = None
        while at < end:
            byte = data[at]
            index = byte - 0x80  # an indexed field whose index fits its first byte: 1 to 126
            header: HeaderTuple | None
            if 0 < index < 0x7F and index - _STATIC_LAST <= len(entries):
                header = (
                    _STATIC[index]
                    if index <= _STATIC_LAST
                    else HeaderTuple(*entries[index - _STATIC_LAST - 1])
                )
                at += 1
            else:  # hpack's own steps, as its decode takes them
                if view is None:
                    view = memoryview(data)
                if byte & 0x80:
                    header, consumed = self._decode_indexed(view[at:])
                elif byte & 0x40:
                    header, consumed = self._decode_literal_index(view[at:])
                elif byte & 0x20:
                    if headers:
                        msg = "Table size update not at the start of the block"
                        raise HPACKDecodingError(msg)
                    consumed = self._update_encoding_context(view[at:])
                    header = None
                else:
                    header, consumed = self._decode_literal_no_index(view[at:])
                at += consumed
                if header is None:
                    continue
                header = _unicode_if_needed(header, True)
            headers.append(header)
            inflated += 32 + len(header[0]) + len(header[1])  # hpack's table_entry_size
            if inflated > limit:
                msg = f"A header list larger than {limit} has been received"
                raise OversizedHeaderListError(msg)
        self._assert_valid_table_size()
        return headers


def checked() -> bool:
    """Whether the running hpack is one these classes were compared with."""
    return hpack.__version__ in CHECKED_VERSIONS


@cache
def _say_which(running: str) -> None:
    """Say once whether connections get these classes (a DEBUG line, see :func:`install`)."""
    if running in CHECKED_VERSIONS:
        _log.debug(
            "hpack %s: header blocks by a2a_trio.server.h2_hpack (the same blocks, less"
            " Python; docs/upstream/hpack-repeated-blocks.md)",
            running,
        )
    else:
        _log.debug(
            "hpack %s: its own encoder and decoder stay (%s checked)",
            running,
            ", ".join(CHECKED_VERSIONS),
        )


def install(connection: Any) -> bool:
    """Give the new h2 ``connection`` a :class:`RememberingEncoder` and a
    :class:`QuickDecoder` with its own settings, on a checked hpack; whether it did.

    Called before the connection has sent or received a header block. The
    first call says which in a DEBUG line of the ``a2a_trio.server`` logger
    (not INFO, as the hypercorn mends say nothing when they apply).
    """
    _say_which(hpack.__version__)
    if not checked():
        return False
    old_encoder, old_decoder = connection.encoder, connection.decoder
    assert not old_encoder.header_table.dynamic_entries, "install before any header block"
    assert not old_decoder.header_table.dynamic_entries, "install before any header block"
    encoder, decoder = RememberingEncoder(), QuickDecoder()
    encoder.header_table_size = old_encoder.header_table_size
    encoder.header_table.resized = old_encoder.header_table.resized
    encoder.table_size_changes = list(old_encoder.table_size_changes)
    decoder.header_table_size = old_decoder.header_table_size
    decoder.max_header_list_size = old_decoder.max_header_list_size
    decoder.max_allowed_table_size = old_decoder.max_allowed_table_size
    connection.encoder, connection.decoder = encoder, decoder
    return True
