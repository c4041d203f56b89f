"""The numba scanner behind ``kineto_scan``: a Kineto trace's events array read straight into integer and float
columns (one row per span event with a string category), no Python object per event. Imported on first use
(numba costs ~0.4 s to import; the compiled code is cached next to this file, as ``gemm_jit`` does).

The scanner is a strict JSON reader (RFC 8259: string escapes, UTF-8 as Python decodes it, the number grammar,
literals, nesting up to ``MAX_DEPTH``): anything it does not take exactly (a value it cannot parse, an escaped key
or phase, a repeated field it reads, args that are not an object or null, an element that is not an object) stops
it with ``BAD`` and the caller leaves the file to the reference reader. Strings and raw values are interned: each
distinct text (its exact bytes, quotes included) gets a code, its bytes kept once in a pool. Numbers are
converted exactly: integers of up to 18 digits, and decimals whose significand (trailing zeros dropped) is at most
2^53 with a power of ten of at most 22 (one correctly rounded multiplication or division of exact doubles:
Clinger's fast path); any other number is listed for the caller to convert with ``float`` (correctly rounded).
"""

from __future__ import annotations

import numba
import numpy as np

# value types in the integer columns
T_ABSENT, T_STR, T_INT, T_FLOAT, T_NULL, T_OTHER, T_BIG = 0, 1, 2, 3, 4, 5, 6
# what a call ended on
NEED_MORE, ARRAY_END, FULL, TABLE_FULL, BAD = 0, 1, 2, 3, 4
# integer columns (codes -1: absent)
(C_CAT, C_NAME_T, C_NAME, C_PID_T, C_PID, C_TID_T, C_TID, C_TS_T, C_DUR_T, C_ARGS, C_CORR_T, C_CORR, C_EXT_T, C_EXT,
 C_GRID, C_BLOCK, C_BYTES_T, C_BYTES, C_SIZE_T, C_SIZE, C_DIMS, C_LEGACY, C_TYPES, C_CONCRETE, C_STRIDES, C_SEQ_T,
 C_SEQ, C_COLL_T) = range(28)
NCOL = 28
_CODES = (C_CAT, C_NAME, C_PID, C_TID, C_GRID, C_BLOCK, C_DIMS, C_LEGACY, C_TYPES, C_CONCRETE, C_STRIDES)
CODE_COLUMNS = np.array(_CODES, dtype=np.int64)
MAX_DEPTH = 64  # nesting read here (bits of one word); deeper values: the reference
_POW10 = np.array([10.0 ** i for i in range(23)], dtype=np.float64)  # exact doubles

# keys read, by id: the event's (1-8) and its args' (11-23)
_KEYS = {b"ph": 1, b"cat": 2, b"name": 3, b"pid": 4, b"tid": 5, b"ts": 6, b"dur": 7, b"args": 8}
_ARG_KEYS = {b"correlation": 11, b"External id": 12, b"grid": 13, b"block": 14, b"bytes": 15, b"size": 16,
             b"Input Dims": 17, b"Input dims": 18, b"Input type": 19, b"Concrete Inputs": 20, b"Input Strides": 21,
             b"Sequence number": 22, b"Collective name": 23}


def _key_table(keys: dict[bytes, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Keys sorted by (length, bytes), their (length, id), and per (length, first byte) the first such row."""
    ordered = sorted(keys, key=lambda k: (len(k), k))
    width = max(map(len, keys))
    table = np.zeros((len(keys), width), dtype=np.uint8)
    meta = np.zeros((len(keys), 2), dtype=np.int64)
    first = np.full((width + 1, 256), -1, dtype=np.int64)
    for row, key in enumerate(ordered):
        table[row, :len(key)] = np.frombuffer(key, dtype=np.uint8)
        meta[row] = (len(key), keys[key])
        if first[len(key), key[0]] < 0:
            first[len(key), key[0]] = row
    return table, meta, first


_TOP, _TOP_META, _TOP_FIRST = _key_table(_KEYS)
_ARG, _ARG_META, _ARG_FIRST = _key_table(_ARG_KEYS)
_TRUE = np.frombuffer(b"true", dtype=np.uint8)
_FALSE = np.frombuffer(b"false", dtype=np.uint8)
_NULL = np.frombuffer(b"null", dtype=np.uint8)
_PLAIN = np.array([32 <= c < 128 and c not in (34, 92) for c in range(256)], dtype=np.uint8)  # no check needed
_JIT = {"cache": True, "nogil": True, "error_model": "numpy", "boundscheck": False}


@numba.njit(inline="always", **_JIT)
def _ws(buf: np.ndarray, p: int, n: int) -> int:
    while p < n:
        c = buf[p]
        if c != 32 and c != 10 and c != 13 and c != 9:
            return p
        p += 1
    return p


@numba.njit(**_JIT)
def _utf8(buf: np.ndarray, p: int, n: int) -> int:
    """Bytes of the UTF-8 sequence at p as Python's strict decoder takes it; -1 cut short, -2 invalid."""
    c = buf[p]
    if c < 0xC2:
        return -2
    lo, hi = 0x80, 0xBF
    if c < 0xE0:
        need = 1
    elif c < 0xF0:
        need = 2
        if c == 0xE0:
            lo = 0xA0
        elif c == 0xED:
            hi = 0x9F
    elif c < 0xF5:
        need = 3
        if c == 0xF0:
            lo = 0x90
        elif c == 0xF4:
            hi = 0x8F
    else:
        return -2
    if p + need >= n:
        return -1
    b = buf[p + 1]
    if b < lo or b > hi:
        return -2
    for j in range(2, need + 1):
        if (buf[p + j] & 0xC0) != 0x80:
            return -2
    return need + 1


@numba.njit(inline="always", **_JIT)
def _string(buf: np.ndarray, p: int, n: int) -> tuple[int, bool]:
    """(index after the string starting at p, whether it has an escape); index -1 cut short, -2 invalid."""
    p += 1
    escaped = False
    while p < n:
        while p + 8 <= n and (_PLAIN[buf[p]] & _PLAIN[buf[p + 1]] & _PLAIN[buf[p + 2]] & _PLAIN[buf[p + 3]] &
                              _PLAIN[buf[p + 4]] & _PLAIN[buf[p + 5]] & _PLAIN[buf[p + 6]] & _PLAIN[buf[p + 7]]):
            p += 8
        if p >= n:
            break
        c = buf[p]
        if _PLAIN[c]:
            p += 1
        elif c == 34:
            return p + 1, escaped
        elif c == 92:
            escaped = True
            if p + 1 >= n:
                return -1, escaped
            e = buf[p + 1]
            if e == 117:
                if p + 6 > n:
                    return -1, escaped
                for j in range(p + 2, p + 6):
                    h = buf[j]
                    if not (48 <= h <= 57 or 65 <= h <= 70 or 97 <= h <= 102):
                        return -2, escaped
                p += 6
            elif e == 34 or e == 92 or e == 47 or e == 98 or e == 102 or e == 110 or e == 114 or e == 116:
                p += 2
            else:
                return -2, escaped
        elif c < 32:
            return -2, escaped
        else:
            k = _utf8(buf, p, n)
            if k < 0:
                return k, escaped
            p += k
    return -1, escaped


@numba.njit(inline="always", **_JIT)
def _number(buf: np.ndarray, p: int, n: int) -> tuple[int, int, int, float]:
    """(end, type, int value, float value) of the number at p: T_INT (up to 18 digits), T_FLOAT (exact fast
    path), T_BIG (an integer or decimal for ``float`` to convert); end -1 cut short, -2 invalid."""
    neg = False
    if buf[p] == 45:
        neg = True
        p += 1
        if p >= n:
            return -1, 0, 0, 0.0
    m, digits, e10, is_float = 0, 0, 0, False
    c = buf[p]
    if c == 48:
        p += 1
    elif 49 <= c <= 57:
        while p < n and 48 <= buf[p] <= 57:
            if digits < 19:
                m = m * 10 + (buf[p] - 48)
            digits += 1
            p += 1
    else:
        return -2, 0, 0, 0.0
    if p < n and buf[p] == 46:
        is_float = True
        p += 1
        start = p
        while p < n and 48 <= buf[p] <= 57:
            d = buf[p] - 48
            if digits == 0 and d == 0:
                e10 -= 1
            else:
                if digits < 19:
                    m = m * 10 + d
                    e10 -= 1
                digits += 1
            p += 1
        if p == start:
            return (-1 if p >= n else -2), 0, 0, 0.0
    if p < n and (buf[p] == 101 or buf[p] == 69):
        is_float = True
        p += 1
        if p < n and (buf[p] == 43 or buf[p] == 45):
            sign = -1 if buf[p] == 45 else 1
            p += 1
        else:
            sign = 1
        start = p
        x = 0
        while p < n and 48 <= buf[p] <= 57:
            if x < 100000:
                x = x * 10 + (buf[p] - 48)
            p += 1
        if p == start:
            return (-1 if p >= n else -2), 0, 0, 0.0
        e10 += sign * x
    if p >= n:
        return -1, 0, 0, 0.0
    if not is_float:
        if digits > 18:
            return p, T_BIG, 0, 0.0
        return p, T_INT, -m if neg else m, 0.0
    if digits > 18:
        return p, T_BIG, 0, 0.0
    if m == 0:
        return p, T_FLOAT, 0, -0.0 if neg else 0.0
    while m % 10 == 0:
        m //= 10
        e10 += 1
    if m > 9007199254740992 or e10 > 22 or e10 < -22:
        return p, T_BIG, 0, 0.0
    value = float(m) * _POW10[e10] if e10 >= 0 else float(m) / _POW10[-e10]
    return p, T_FLOAT, 0, -value if neg else value


@numba.njit(inline="always", **_JIT)
def _literal(buf: np.ndarray, p: int, n: int, word: np.ndarray) -> int:
    k = len(word)
    if p + k > n:
        for j in range(n - p):
            if buf[p + j] != word[j]:
                return -2
        return -1
    for j in range(k):
        if buf[p + j] != word[j]:
            return -2
    return p + k


@numba.njit(inline="always", **_JIT)
def _scalar(buf: np.ndarray, p: int, n: int) -> int:
    c = buf[p]
    if c == 34:
        return _string(buf, p, n)[0]
    if c == 45 or 48 <= c <= 57:
        return _number(buf, p, n)[0]
    if c == 116:
        return _literal(buf, p, n, _TRUE)
    if c == 102:
        return _literal(buf, p, n, _FALSE)
    if c == 110:
        return _literal(buf, p, n, _NULL)
    return -2


@numba.njit(**_JIT)
def _value(buf: np.ndarray, p: int, n: int) -> int:
    """Index after the JSON value at p (validated); -1 cut short, -2 invalid or deeper than ``MAX_DEPTH``."""
    c = buf[p]
    if c != 123 and c != 91:
        return _scalar(buf, p, n)
    objects = np.uint64(1) if c == 123 else np.uint64(0)  # bit d: the container at depth d is an object
    depth = 1
    state = 0 if c == 123 else 2  # 0 key or close, 1 key, 2 value or close, 3 value, 4 after a value, 5 colon
    p += 1
    while True:
        p = _ws(buf, p, n)
        if p >= n:
            return -1
        c = buf[p]
        if state == 0 or state == 1:
            if c == 125 and state == 0:
                depth -= 1
                p += 1
                if depth == 0:
                    return p
                state = 4
            elif c == 34:
                p = _string(buf, p, n)[0]
                if p < 0:
                    return p
                state = 5
            else:
                return -2
        elif state == 5:
            if c != 58:
                return -2
            p += 1
            state = 3
        elif state == 2 or state == 3:
            if c == 93 and state == 2:
                depth -= 1
                p += 1
                if depth == 0:
                    return p
                state = 4
            elif c == 123 or c == 91:
                if depth >= MAX_DEPTH:
                    return -2
                if c == 123:
                    objects |= np.uint64(1) << np.uint64(depth)
                else:
                    objects &= ~(np.uint64(1) << np.uint64(depth))
                depth += 1
                p += 1
                state = 0 if c == 123 else 2
            else:
                p = _scalar(buf, p, n)
                if p < 0:
                    return p
                state = 4
        else:
            top = (objects >> np.uint64(depth - 1)) & np.uint64(1)
            if c == 44:
                p += 1
                state = 1 if top else 3
            elif (c == 125 and top) or (c == 93 and not top):
                depth -= 1
                p += 1
                if depth == 0:
                    return p
            else:
                return -2


@numba.njit(inline="always", **_JIT)
def _key(buf: np.ndarray, s: int, e: int, table: np.ndarray, meta: np.ndarray, first: np.ndarray) -> int:
    """The id of the key buf[s:e] (0: not read): the rows of ``table`` with its length and first byte compared."""
    length = e - s
    if length <= 0 or length >= first.shape[0]:
        return 0
    row = first[length, buf[s]]
    if row < 0:
        return 0
    while row < meta.shape[0] and meta[row, 0] == length and table[row, 0] == buf[s]:
        same = True
        for j in range(1, length):
            if buf[s + j] != table[row, j]:
                same = False
                break
        if same:
            return meta[row, 1]
        row += 1
    return 0


@numba.njit(**_JIT)
def _intern(buf: np.ndarray, s: int, e: int, table: np.ndarray, hashes: np.ndarray, entries: np.ndarray,
            pool: np.ndarray, counts: np.ndarray) -> int:
    """The code of the text buf[s:e] (a new one if unseen); -3 where the table or pool must grow first."""
    h = np.uint64(e - s) * np.uint64(0x9E3779B97F4A7C15)  # length, the first and the last 8 bytes
    for j in range(s, min(e, s + 8)):
        h = (h ^ np.uint64(buf[j])) * np.uint64(1099511628211)
    for j in range(max(s + 8, e - 8), e):
        h = (h ^ np.uint64(buf[j])) * np.uint64(1099511628211)
    h ^= h >> np.uint64(29)
    mask = np.uint64(len(table) - 1)
    slot = h & mask
    length = e - s
    while True:
        code = table[slot] - 1
        if code < 0:
            break
        if hashes[code] == h and entries[code, 1] == length:
            at = entries[code, 0]
            same = True
            for j in range(length):
                if pool[at + j] != buf[s + j]:
                    same = False
                    break
            if same:
                return code
        slot = (slot + np.uint64(1)) & mask
    code = counts[0]
    if 2 * (code + 1) > len(table) or code >= len(hashes) or counts[1] + length > len(pool):
        return -3
    at = counts[1]
    pool[at:at + length] = buf[s:e]
    hashes[code], entries[code, 0], entries[code, 1] = h, at, length
    counts[0], counts[1] = code + 1, at + length
    table[slot] = code + 1
    return code


@numba.njit(**_JIT)
def rehash(table: np.ndarray, hashes: np.ndarray, count: int) -> None:
    """Place the first ``count`` entries in an empty ``table``."""
    mask = np.uint64(len(table) - 1)
    for code in range(count):
        slot = hashes[code] & mask
        while table[slot] != 0:
            slot = (slot + np.uint64(1)) & mask
        table[slot] = code + 1


@numba.njit(**_JIT)
def _typed(buf: np.ndarray, p: int, n: int) -> tuple[int, int, int, float]:
    """(end, type, int value, float value) of the value at p; end -1 cut short, -2 invalid."""
    c = buf[p]
    if c == 34:
        return _string(buf, p, n)[0], T_STR, 0, 0.0
    if c == 45 or 48 <= c <= 57:
        return _number(buf, p, n)
    if c == 110:
        return _literal(buf, p, n, _NULL), T_NULL, 0, 0.0
    return _value(buf, p, n), T_OTHER, 0, 0.0


@numba.njit(**_JIT)
def _args(buf: np.ndarray, p: int, n: int, row: np.ndarray, table: np.ndarray, hashes: np.ndarray,
          entries: np.ndarray, pool: np.ndarray, counts: np.ndarray) -> int:
    """Read the args object at p into ``row``; index after it, -1 cut short, -2 invalid, -3 table full."""
    p = _ws(buf, p + 1, n)
    if p >= n:
        return -1
    if buf[p] == 125:
        return p + 1
    seen = 0
    while True:
        if buf[p] != 34:
            return -2
        k, escaped = _string(buf, p, n)
        if k < 0:
            return k
        ident = _key(buf, p + 1, k - 1, _ARG, _ARG_META, _ARG_FIRST)
        if escaped:
            return -2  # an escaped key may spell a field read here
        p = _ws(buf, k, n)
        if p >= n:
            return -1
        if buf[p] != 58:
            return -2
        p = _ws(buf, p + 1, n)
        if p >= n:
            return -1
        if ident == 0:
            p = _value(buf, p, n)
        else:
            bit = 1 << ident
            if seen & bit:
                return -2  # a repeated field
            seen |= bit
            if ident == 11 or ident == 12 or ident == 15 or ident == 16 or ident == 22 or ident == 23:
                end, kind, value, _ = _typed(buf, p, n)
                column = (C_CORR_T if ident == 11 else C_EXT_T if ident == 12 else C_BYTES_T if ident == 15
                          else C_SIZE_T if ident == 16 else C_SEQ_T if ident == 22 else C_COLL_T)
                row[column] = kind
                if column != C_COLL_T:
                    row[column + 1] = value
                p = end
            else:
                end = _value(buf, p, n)
                if end < 0:
                    return end
                code = _intern(buf, p, end, table, hashes, entries, pool, counts)
                if code < 0:
                    return code
                column = (C_GRID if ident == 13 else C_BLOCK if ident == 14 else C_DIMS if ident == 17 else
                          C_LEGACY if ident == 18 else C_TYPES if ident == 19 else C_CONCRETE if ident == 20
                          else C_STRIDES)
                row[column] = code
                p = end
        if p < 0:
            return p
        p = _ws(buf, p, n)
        if p >= n:
            return -1
        if buf[p] == 44:
            p = _ws(buf, p + 1, n)
            if p >= n:
                return -1
        elif buf[p] == 125:
            return p + 1
        else:
            return -2


@numba.njit(**_JIT)
def _event(buf: np.ndarray, p: int, n: int, row: np.ndarray, times: np.ndarray, slow: np.ndarray, nslow: int,
           table: np.ndarray, hashes: np.ndarray, entries: np.ndarray, pool: np.ndarray,
           counts: np.ndarray) -> tuple[int, bool, int]:
    """Read the event object at p: (index after it or -1 / -2 / -3, whether it is a span with a string category,
    slow numbers listed so far)."""
    for column in range(NCOL):
        row[column] = 0
    for column in CODE_COLUMNS:
        row[column] = -1
    is_span, other_phase, has_cat = False, False, False
    seen = 0
    p = _ws(buf, p + 1, n)
    if p >= n:
        return -1, False, nslow
    if buf[p] == 125:
        return p + 1, False, nslow
    while True:
        if buf[p] != 34:
            return -2, False, nslow
        k, escaped = _string(buf, p, n)
        if k < 0:
            return k, False, nslow
        ident = _key(buf, p + 1, k - 1, _TOP, _TOP_META, _TOP_FIRST)
        if escaped:
            return -2, False, nslow
        p = _ws(buf, k, n)
        if p >= n:
            return -1, False, nslow
        if buf[p] != 58:
            return -2, False, nslow
        p = _ws(buf, p + 1, n)
        if p >= n:
            return -1, False, nslow
        if ident != 0:
            bit = 1 << ident
            if seen & bit:
                return -2, False, nslow
            seen |= bit
        if ident == 0 or (other_phase and ident != 1):
            p = _value(buf, p, n)
        elif ident == 1:  # ph
            end, kind, _, _ = _typed(buf, p, n)
            if end < 0:
                return end, False, nslow
            if kind == T_STR:
                escaped_ph = False
                for j in range(p + 1, end - 1):
                    if buf[j] == 92:
                        escaped_ph = True
                if escaped_ph:
                    return -2, False, nslow
                is_span = end - p == 3 and buf[p + 1] == 88
            other_phase = not is_span
            p = end
        elif ident == 8:  # args
            c = buf[p]
            if c == 123:
                row[C_ARGS] = 1
                p = _args(buf, p, n, row, table, hashes, entries, pool, counts)
            elif c == 110:
                p = _literal(buf, p, n, _NULL)
            else:
                end = _value(buf, p, n)
                return (end if end < 0 else -2), False, nslow  # args that are not an object: the reference
        else:
            end, kind, value, number = _typed(buf, p, n)
            if end < 0:
                return end, False, nslow
            if ident == 6 or ident == 7:  # ts, dur
                row[C_TS_T if ident == 6 else C_DUR_T] = kind
                if kind == T_INT:
                    times[ident - 6] = float(value)
                elif kind == T_FLOAT:
                    times[ident - 6] = number
                elif kind == T_BIG:
                    if nslow >= len(slow):
                        return -3, False, nslow
                    slow[nslow, 0], slow[nslow, 1], slow[nslow, 2] = ident - 6, p, end
                    nslow += 1
            elif kind == T_STR:
                code = _intern(buf, p, end, table, hashes, entries, pool, counts)
                if code < 0:
                    return code, False, nslow
                if ident == 2:
                    row[C_CAT] = code
                    has_cat = True
                else:
                    column = C_NAME_T if ident == 3 else C_PID_T if ident == 4 else C_TID_T
                    row[column], row[column + 1] = T_STR, code
            elif ident == 3 or ident == 4 or ident == 5:
                column = C_NAME_T if ident == 3 else C_PID_T if ident == 4 else C_TID_T
                row[column] = kind
                if kind == T_INT:
                    row[column + 1] = value
            p = end
        if p < 0:
            return p, False, nslow
        p = _ws(buf, p, n)
        if p >= n:
            return -1, False, nslow
        if buf[p] == 44:
            p = _ws(buf, p + 1, n)
            if p >= n:
                return -1, False, nslow
        elif buf[p] == 125:
            return p + 1, is_span and has_cat, nslow
        else:
            return -2, False, nslow


@numba.njit(**_JIT)
def scan(buf: np.ndarray, p: int, n: int, state: int, ints: np.ndarray, times: np.ndarray, rows: int,
         slow: np.ndarray, table: np.ndarray, hashes: np.ndarray, entries: np.ndarray, pool: np.ndarray,
         counts: np.ndarray) -> tuple[int, int, int, int, int, int]:
    """Read events from buf[p:n] (inside the events array) into the rows from ``rows`` on: (what it ended on, the
    index reached (the start of an event not read), state, rows filled, slow numbers listed, events read).
    ``state``: 0 before the first element, 1 after a comma, 2 after an element. ``slow`` rows: (row, 0 ts / 1 dur,
    start, end) of numbers the caller converts."""
    seen, nslow = 0, 0
    cap = ints.shape[0]
    while True:
        q = _ws(buf, p, n)
        if q >= n:
            return NEED_MORE, p, state, rows, nslow, seen
        c = buf[q]
        if state == 2:
            if c == 44:
                p, state = q + 1, 1
                continue
            if c == 93:
                return ARRAY_END, q, state, rows, nslow, seen
            return BAD, q, state, rows, nslow, seen
        if c == 93 and state == 0:
            return ARRAY_END, q, state, rows, nslow, seen
        if c != 123:
            return BAD, q, state, rows, nslow, seen  # an element that is not an object: the reference
        if rows >= cap or nslow + 2 > len(slow):
            return FULL, q, state, rows, nslow, seen
        end, kept, listed = _event(buf, q, n, ints[rows], times[rows], slow[:, 1:], nslow, table, hashes, entries,
                                   pool, counts)
        if end == -1:
            return NEED_MORE, q, state, rows, nslow, seen
        if end == -2:
            return BAD, q, state, rows, nslow, seen
        if end == -3:
            return TABLE_FULL, q, state, rows, nslow, seen
        seen += 1
        if kept:
            for k in range(nslow, listed):
                slow[k, 0] = rows
            nslow = listed
            rows += 1
        p, state = end, 2


@numba.njit(**_JIT)
def gather(buf: np.ndarray, slow: np.ndarray, count: int, out: np.ndarray) -> bool:
    """Copy the texts of the first ``count`` slow numbers into the rows of ``out`` (NUL-padded, for numpy's
    correctly rounded text-to-float cast); False where one is longer than a row."""
    width = out.shape[1]
    for k in range(count):
        start, end = slow[k, 2], slow[k, 3]
        if end - start > width:
            return False
        for j in range(width):
            out[k, j] = buf[start + j] if start + j < end else 0
    return True
