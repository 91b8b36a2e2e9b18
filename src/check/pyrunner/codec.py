# servegate's encoding of Python values between the program and the test
# runner: one JSON value, every value tagged with its type. A value crosses
# as a plain value of its base type (a subclass's methods stay behind); what
# is not such a value stays where it is and crosses as a reference.
import base64 as _base64

DEPTH = 100
LINE = 4 << 20
# The most items of one list or tuple, and of one set or dict (hashed:
# colliding keys make each insertion slow; the runner's CPU limit bounds
# the rest).
ITEMS = 1_000_000
HASHED = 100_000


class Refused(Exception):
    """A value that is not servegate's encoding."""


def encode(value, keep, depth=0):
    if depth > DEPTH:
        raise ValueError(f"a value nested deeper than {DEPTH} levels")
    if value is None or value is True or value is False:
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        # Hex: linear both ways, and no limit on digits (str() has one).
        return {"i": hex(int(value))}
    if isinstance(value, float):
        return {"f": repr(float(value))}
    if isinstance(value, complex):
        return {"c": [repr(value.real), repr(value.imag)]}
    if isinstance(value, str):
        return {"s": str(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"b": _base64.b64encode(bytes(value)).decode()}
    for kind, tag in ((list, "l"), (tuple, "t"), (set, "set"), (frozenset, "fs")):
        if isinstance(value, kind):
            return {tag: [encode(v, keep, depth + 1) for v in value]}
    if isinstance(value, dict):
        return {"d": [[encode(k, keep, depth + 1), encode(v, keep, depth + 1)] for k, v in value.items()]}
    return {"r": keep(value)}


def decode(value, ref, depth=0):
    if depth > DEPTH:
        raise Refused(f"a value nested deeper than {DEPTH} levels")
    if value is None or isinstance(value, bool):
        return value
    if not isinstance(value, dict) or len(value) != 1:
        raise Refused(f"not a tagged value: {str(value)[:80]}")
    ((tag, x),) = value.items()
    text = isinstance(x, str)
    many = isinstance(x, list)
    try:
        if tag == "i" and text:
            return int(x, 16)
        if tag == "f" and text and len(x) <= 64:
            return float(x)
        if tag == "c" and many and len(x) == 2 and all(isinstance(p, str) and len(p) <= 64 for p in x):
            return complex(float(x[0]), float(x[1]))
        if tag == "s" and text:
            return x
        if tag == "b" and text:
            return _base64.b64decode(x, validate=True)
        if many and tag in ("l", "t", "set", "fs", "d"):
            if len(x) > (HASHED if tag in ("set", "fs", "d") else ITEMS):
                raise Refused(f"a {tag!r} of {len(x)} items")
            if tag == "d":
                if not all(isinstance(p, list) and len(p) == 2 for p in x):
                    raise Refused("a dict's entry is not a [key, value] pair")
                return {decode(k, ref, depth + 1): decode(v, ref, depth + 1) for k, v in x}
            items = [decode(v, ref, depth + 1) for v in x]
            return {"l": list, "t": tuple, "set": set, "fs": frozenset}[tag](items)
        if tag == "r":
            return ref(x)
    except Refused:
        raise
    except Exception as e:
        raise Refused(f"{tag!r}: {type(e).__name__}: {str(e)[:200]}") from None
    raise Refused(f"not a tagged value: {str(value)[:80]}")


class Lines:
    """JSON lines over a descriptor, each at most LINE bytes."""

    def __init__(self, fd):
        self.fd = fd
        self.buffer = b""

    def read(self):
        """The next line's value; None at the end of the stream."""
        import json
        import os

        while b"\n" not in self.buffer:
            if len(self.buffer) > LINE:
                raise Refused(f"a line longer than {LINE >> 20} MiB")
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        if len(line) > LINE:
            raise Refused(f"a line longer than {LINE >> 20} MiB")
        try:
            return json.loads(line)
        except (ValueError, RecursionError) as e:
            raise Refused(f"not JSON: {type(e).__name__}: {str(e)[:200]}") from None

    def write(self, value):
        import json
        import os

        data = (json.dumps(value) + "\n").encode()
        while data:
            data = data[os.write(self.fd, data):]
