"""The descriptor pool of the generated a2a_pb2: a private one.

Protobuf's default pool holds one definition per file name and per symbol, and
other libraries (a2a-sdk among them) register their own ``a2a.proto`` of
package ``lf.a2a.v1`` there, which differs from ours as the specification
moves. Two definitions in one pool stop the second import; a pool of our own
lets both live in one process. The files ``a2a.proto`` imports are copied in
from the default pool, where their own modules put them.
"""

from __future__ import annotations

from google.api import annotations_pb2, client_pb2, field_behavior_pb2
from google.protobuf import descriptor, descriptor_pool, empty_pb2, struct_pb2, timestamp_pb2

__all__ = ["POOL"]

POOL = descriptor_pool.DescriptorPool()
_added: set[str] = set()


def _add(file: descriptor.FileDescriptor) -> None:
    if file.name in _added:
        return
    for dependency in file.dependencies:
        _add(dependency)
    POOL.AddSerializedFile(file.serialized_pb)
    _added.add(file.name)


for _module in (
    annotations_pb2,
    client_pb2,
    field_behavior_pb2,
    empty_pb2,
    struct_pb2,
    timestamp_pb2,
):
    _add(_module.DESCRIPTOR)
