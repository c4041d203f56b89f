"""The events of a Kineto trace, decoded in chunks of the ``traceEvents`` array: only the fields the parser
reads (msgspec Structs; every other field is skipped without building a Python object), memory bounded by
the chunk.

The array is cut after an event (``}`` then ``,``) and each piece decoded as an array of its own. A cut inside a
string or a nested value cannot decode, so the decoder checks every cut; the cut before it is tried next.
What the fast path cannot take (an event that is not an object or whose ``args`` is not one: decoded untyped;
JSON the decoder rejects: streamed by ijson from the last good event on, as the whole file was before) still
gives the same events or the same error.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from typing import Any, BinaryIO, ClassVar, Union

import ijson  # type: ignore[import-untyped]
import msgspec

from perfmodel.traces.json_depth import DepthLimited
from perfmodel.traces.records import TraceError
from perfmodel.traces.source import PrefixedStream

CHUNK_BYTES = 4 << 20  # decompressed bytes read per step
MAX_PREFIX_BYTES = 64 << 20  # bytes before "traceEvents" looked through for it; past that, ijson reads the file
MAX_RETRIES = 8  # earlier cuts tried when a cut does not decode (it fell inside a string)
_ARRAY_START = re.compile(rb'"traceEvents"\s*:\s*\[')
_EVENT_END = re.compile(rb"\}\s*,")
_ARRAY_END = re.compile(rb"\}\s*\]")
_WHITESPACE = b" \t\r\n"


NOT_RECORDED = msgspec.Raw(b"")  # a raw field the event does not have


class EventArgs(msgspec.Struct, gc=False, rename={
        "external_id": "External id", "input_dims": "Input Dims", "input_types": "Input type",
        "concrete_inputs": "Concrete Inputs", "input_strides": "Input Strides", "sequence": "Sequence number",
        "collective_name": "Collective name", "in_elements": "In msg nelems", "out_elements": "Out msg nelems",
        "group_size": "Group size", "legacy_input_dims": "Input dims"}):
    """The ``args`` fields the parser reads, as the JSON gave them (None: absent or null). Shapes and type
    lists stay raw JSON (empty: absent): they repeat, and are converted once per distinct text (an event decoded
by another reader holds them decoded)."""

    correlation: Any = None
    external_id: Any = None
    device: Any = None
    stream: Any = None
    grid: msgspec.Raw = NOT_RECORDED  # raw: grid and block sizes repeat, converted once per distinct text
    block: msgspec.Raw = NOT_RECORDED
    bytes: Any = msgspec.UNSET  # UNSET: absent (then "size" counts); None: null
    size: Any = None
    input_dims: msgspec.Raw = NOT_RECORDED
    legacy_input_dims: msgspec.Raw = NOT_RECORDED  # PyTorch 1.8's spelling ("Input dims"), read where no Input Dims
    input_types: msgspec.Raw = NOT_RECORDED
    concrete_inputs: msgspec.Raw = NOT_RECORDED
    input_strides: msgspec.Raw = NOT_RECORDED
    sequence: Any = None
    collective_name: Any = None
    in_elements: Any = None
    out_elements: Any = None
    group_size: Any = None
    dtype: Any = None

    def comm_fields(self) -> dict[str, Any]:
        """The collective's fields under their trace names (``comm_args`` reads these)."""
        return {"Collective name": self.collective_name, "In msg nelems": self.in_elements,
                "Out msg nelems": self.out_elements, "Group size": self.group_size, "dtype": self.dtype}


class Event(msgspec.Struct, gc=False):
    """One trace event: the fields the parser reads (None: absent or null; ``args`` None: absent or not an
    object)."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: EventArgs | None = None


class SpanEvent(msgspec.Struct, gc=False, tag_field="ph", tag="X"):
    """An event of phase ``X`` (a span: ops, launches, kernels) as ``PHASED`` decodes it: ``Event``'s fields."""

    ph: ClassVar[str] = "X"
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: EventArgs | None = None  # grid and block raw (not lists: no object the garbage collector tracks)


# the Chrome trace format's other phases: only the phase is decoded (their fields are skipped without objects)
_OTHER_PHASES = tuple(msgspec.defstruct(f"Phase{ord(ph)}", [], tag_field="ph", tag=ph, gc=False,
                                        namespace={"ph": ph}) for ph in "BEiICbnestfPONDMVvRc()")
_DECODER = msgspec.json.Decoder(list[Event])
# events by phase: a span's fields, the phase alone for any other; an event without a known phase (or any other
# shape the tagged union rejects) sends its chunk to the untyped decoder, as an odd event does for ``_DECODER``
PHASED = msgspec.json.Decoder(list[Union[SpanEvent, *_OTHER_PHASES]])  # type: ignore[valid-type]
_FIELDS = dict(zip(EventArgs.__struct_fields__, EventArgs.__struct_encode_fields__, strict=True))


def event_from_object(item: object) -> Event | None:
    """An ``Event`` from an already-decoded JSON value (None for one that is not an object)."""
    if not isinstance(item, dict):
        return None
    args = item.get("args")
    parsed_args: EventArgs | None = None
    if isinstance(args, dict):
        # the shape and type lists stay decoded here (``Collector`` takes either): no re-encoding
        fields: dict[str, Any] = {name: args[key] for name, key in _FIELDS.items() if key in args}
        parsed_args = EventArgs(**fields)
    return Event(item.get("ph"), item.get("cat"), item.get("name"), item.get("pid"), item.get("tid"), item.get("ts"),
                 item.get("dur"), parsed_args)


def _ijson_events(stream: io.RawIOBase, prefix: str) -> Iterator[list[Event]]:
    """The events ijson streams (the reference reader), in batches; JSON nested past ``MAX_JSON_DEPTH`` is a
    ``TraceError`` (ijson's memory grows with the square of the depth)."""
    batch: list[Event] = []
    try:
        for item in ijson.items(DepthLimited(stream), prefix, use_float=True):
            event = event_from_object(item)
            if event is not None:
                batch.append(event)
            if len(batch) >= 4096:
                yield batch
                batch = []
    except ijson.JSONError as exc:
        raise TraceError(f"the Kineto trace is not valid JSON ({exc}); expected a complete Chrome trace") from None
    except (ijson.IncompleteJSONError, UnicodeDecodeError) as exc:  # pragma: no cover - subclass above
        raise TraceError(f"the Kineto trace is truncated ({exc})") from None
    if batch:
        yield batch


def reference_event_batches(stream: BinaryIO, top_level_list: bool) -> Iterator[list[Event]]:
    """The events as ijson streams them from the whole file: the reference the chunked reader is tested against."""
    return _ijson_events(PrefixedStream(b"", stream), "item" if top_level_list else "traceEvents.item")


def _decode(piece: bytes | memoryview, decoder: msgspec.json.Decoder[Any] = _DECODER) -> list[Event] | None:
    """The events of ``[piece]``; None where it is not valid JSON (a cut inside a string or a nested value)."""
    return _decode_array(b"".join((b"[", piece, b"]")), decoder)  # one copy of the piece


def _decode_array(wrapped: bytes | memoryview, decoder: msgspec.json.Decoder[Any]) -> list[Event] | None:
    """The events of the JSON array ``wrapped``; None where it is not valid JSON."""
    try:
        events: list[Event] = decoder.decode(wrapped)
        return events
    except msgspec.ValidationError:  # valid JSON, an event or its args not an object: decode it untyped
        pass
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None
    try:
        items = msgspec.json.decode(wrapped)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None
    return [e for e in map(event_from_object, items) if e is not None]


def _last_cut(data: bytes | bytearray, pattern: re.Pattern[bytes], end: int) -> int:
    """Index just after the last ``}`` before ``end`` that ``pattern`` finds a separator after; -1 if none."""
    quick = data.rfind(b"},", 0, end) if pattern is _EVENT_END else -1
    if quick >= 0:
        return quick + 1
    last = -1
    for match in pattern.finditer(data, 0, end):
        last = match.start() + 1
    return last


def _cut_events(data: bytes, pattern: re.Pattern[bytes],
                decoder: msgspec.json.Decoder[Any] = _DECODER) -> tuple[int, list[Event]] | None:
    """Decode ``data`` up to its last cut that decodes (trying ``MAX_RETRIES`` earlier ones): (bytes used, events);
    None where none decodes."""
    end = len(data)
    for _ in range(MAX_RETRIES):
        cut = _last_cut(data, pattern, end)
        if cut < 0:
            return None
        with memoryview(data) as view:
            events = _decode(view[:cut], decoder)
        if events is not None:
            return cut, events
        end = cut - 1
    return None


def _cut_in_place(buffer: bytearray,
                  decoder: msgspec.json.Decoder[Any]) -> tuple[int, int, list[Event]] | None:
    """``_cut_events`` on ``buffer[1:]`` without copying the piece: ``buffer`` starts with the ``[`` that opens it and
    the byte after the cut (its ``,`` or a space) becomes the ``]`` that closes it (put back where the cut does not
    decode). (index of that byte, the byte it was, events); None where no cut decodes. A new buffer each piece:
    the events' raw fields are views into it."""
    end = len(buffer)
    for _ in range(MAX_RETRIES):
        cut = _last_cut(buffer, _EVENT_END, end)
        if cut < 1:
            return None
        was = buffer[cut]
        buffer[cut] = 0x5D  # ]
        with memoryview(buffer) as view:
            events = _decode_array(view[:cut + 1], decoder)
        if events is not None:
            return cut, was, events
        buffer[cut] = was
        end = cut - 1
    return None


def _array_start(stream: BinaryIO, top_level_list: bool) -> tuple[bytes, int | None]:
    """The bytes read so far and the index just after the events array's ``[`` (None where it is not found:
    ijson then reads the file)."""
    data = b""
    while len(data) <= MAX_PREFIX_BYTES:
        chunk = stream.read(CHUNK_BYTES)
        data += chunk
        if top_level_list:
            stripped = data.lstrip(_WHITESPACE)
            if stripped:
                return data, (len(data) - len(stripped) + 1 if stripped[:1] == b"[" else None)
        else:
            found = _ARRAY_START.search(data)
            if found is not None:
                try:
                    msgspec.json.decode(data[:found.end()] + b"]}")
                except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
                    return data, None  # not the top-level key (or a broken head): ijson decides
                return data, found.end()
        if not chunk:
            break
    return data, None


def iter_event_batches(stream: BinaryIO, top_level_list: bool,
                       decoder: msgspec.json.Decoder[Any] = _DECODER) -> Iterator[list[Event]]:
    """The trace's events in file order, in batches. Raises ``TraceError`` for JSON that is broken or cut short.
    ``decoder``: ``PHASED`` gives ``SpanEvent``s and phase-only events (each with ``ph``) for the plain ones."""
    prefix = "item" if top_level_list else "traceEvents.item"
    opening = b"[" if top_level_list else b'{"traceEvents":['
    data, position = _array_start(stream, top_level_list)
    if position is None:
        yield from _ijson_events(PrefixedStream(data, stream), prefix)
        return
    buffer = bytearray().join((b"[", memoryview(data)[position:]))  # the piece after its opening [
    while True:
        chunk = stream.read(CHUNK_BYTES)
        if not chunk:
            break
        buffer = bytearray().join((buffer, chunk))
        in_place = _cut_in_place(buffer, decoder)
        if in_place is None:
            if len(buffer) - 1 > 4 * CHUNK_BYTES:  # no cut decodes in a large piece: let ijson read (or reject) it
                yield from _ijson_events(PrefixedStream(opening + bytes(buffer[1:]), stream), prefix)
                return
            continue
        cut, was, events = in_place
        yield events
        rest = buffer[cut + 1:]  # past the ',' after the last event used
        buffer = bytearray(b"[") + (rest if was == 0x2C else rest.lstrip(_WHITESPACE)[1:])
    data = bytes(buffer[1:])
    # the end of the file: the last events up to the array's ']', then the rest of the document
    done = _cut_events(data, _ARRAY_END, decoder) if data.lstrip(_WHITESPACE)[:1] != b"]" else (0, [])
    if done is None:
        yield from _ijson_events(PrefixedStream(opening + data, stream), prefix)
        return
    used, events = done
    if events:
        yield events
    # the tail after the array (and any other events array it holds) as ijson reads it: errors as before
    yield from _ijson_events(PrefixedStream(opening + data[used:].lstrip(_WHITESPACE), stream),
                             prefix)
