"""The on-disk format of Debugger trials (smdebug's), as pure functions over bytes.

records: TFRecord framing; events: tensor Event payloads (dtypes: their DataType numbers); index:
index JSON; collection_file: collections JSON; paths: key names and reduction names; consolidated:
sdk_ext's one addition, every index file of a worker in one object (smdebug never reads it). Nothing
here does I/O.
"""

from sdk_ext.format.collection_file import (
    CollectionsFile,
    CollectionSpec,
    ReductionSpec,
    SaveSpec,
    encode_collections,
    parse_collections,
)
from sdk_ext.format.events import (
    TensorEvent,
    decode_tensor_event,
    decode_tensor_value,
    encode_tensor_event,
    encode_tensor_event_parts,
    encode_tensor_record_parts,
    to_numpy,
)
from sdk_ext.format.index import IndexFile, ShapeEntry, TensorEntry, encode_index, parse_index
from sdk_ext.format.records import (
    MAGIC_FOOTER,
    RecordSpan,
    encode_record,
    iter_records,
    masked_crc32c,
    read_record,
    scan_records,
)

__all__ = [
    "MAGIC_FOOTER",
    "CollectionSpec",
    "CollectionsFile",
    "IndexFile",
    "RecordSpan",
    "ReductionSpec",
    "SaveSpec",
    "ShapeEntry",
    "TensorEntry",
    "TensorEvent",
    "decode_tensor_event",
    "decode_tensor_value",
    "encode_collections",
    "encode_index",
    "encode_record",
    "encode_tensor_event",
    "encode_tensor_event_parts",
    "encode_tensor_record_parts",
    "iter_records",
    "masked_crc32c",
    "parse_collections",
    "parse_index",
    "read_record",
    "scan_records",
    "to_numpy",
]
