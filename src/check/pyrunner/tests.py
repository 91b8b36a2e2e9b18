# servegate's test runner: runs a code check's tests in a process of its
# own, outside the program's sandbox, calling the program's functions
# through references (Remote). Its standard input is the channel: first
# servegate's job (prelude, names to bind, tests), then the program's
# lines. Its verdict goes out on its standard output, a JSON line each;
# what the tests print goes to stderr.
import builtins
import importlib
import json
import os
import resource
import sys
import traceback

# Bounds of the runner's own: CPU seconds and address space (argv), so
# that what the program sends cannot make it burn the host.
for limit, value in ((resource.RLIMIT_CPU, int(sys.argv[1])), (resource.RLIMIT_AS, int(sys.argv[2]) << 20)):
    try:
        resource.setrlimit(limit, (value, value))
    except (ValueError, OSError):
        pass

verdict = os.fdopen(os.dup(1), "w", buffering=1)
os.dup2(2, 1)
channel = Lines(0)
calls = []


def clean(value):
    """Strings as servegate reads them: UTF-8 (a lone surrogate escaped),
    each at most 4,000 characters."""
    if isinstance(value, str):
        text = value.encode("utf-8", "backslashreplace").decode()
        return text if len(text) <= 4000 else text[:3999] + "…"
    if isinstance(value, list):
        return [clean(v) for v in value]
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    return value


def say(**fields):
    verdict.write(json.dumps(clean(fields)) + "\n")
    verdict.flush()


class Ended(BaseException):
    """The program ended, or broke the protocol, during a request: no test
    may catch it."""


class ProgramError(Exception):
    """An exception the program raised that is not one of Python's."""


def short(value, n=200):
    try:
        text = repr(value)
    except ValueError:
        text = f"<an int of {value.bit_length()} bits>" if isinstance(value, int) else "<unprintable>"
    return text if len(text) <= n else text[: n - 1] + "…"


# Set once the program ended or broke the channel: no test may pass after.
broken = []


def ask(op, remote, **fields):
    label = object.__getattribute__(remote, "_label")
    what = label if op == "call" else f"{op} of {label}"
    if op == "call":
        args, kwargs = fields["args"], fields["kwargs"]
        shown = ", ".join([short(a, 80) for a in args] + [f"{k}={short(v, 80)}" for k, v in kwargs.items()])
        what = f"{label}({shown})"
        fields = {"args": encode(list(args), sendable), "kwargs": encode(dict(kwargs), sendable)}
    elif "key" in fields:
        fields["key"] = encode(fields["key"], sendable)
    try:
        channel.write({"op": op, "ref": [object.__getattribute__(remote, "_id")], **fields})
        reply = channel.read()
    except (OSError, Refused) as e:
        broken.append(f"the program broke off during {what}: {e}")
        raise Ended(broken[-1]) from None
    if reply is None:
        broken.append(f"the program ended during {what}")
        raise Ended(broken[-1])
    try:
        if not isinstance(reply, dict) or len(reply) != 1:
            raise Refused("not {ok} or {raise}")
        if "raise" in reply:
            kind, message, trace = reply["raise"]
            if not all(isinstance(s, str) for s in (kind, message, trace)):
                raise Refused("a raise that is not three strings")
        else:
            value = decode(reply["ok"], lambda x: remote_of(x, what))
    except (Refused, KeyError, ValueError, TypeError) as e:
        broken.append(f"the program's answer to {what} is not servegate's encoding: {e}")
        raise Ended(broken[-1]) from None
    if "raise" in reply:
        calls.append(f"{what} raised {kind[:80]}: {message[:200]}")
        cls = getattr(builtins, kind, None)
        # A StopIteration from a call would end the tests' own loop over it
        # (`all(map(f, xs))`): only `next` may raise one.
        if cls in (StopIteration, StopAsyncIteration) and op != "next":
            cls = None
        if not (isinstance(cls, type) and issubclass(cls, Exception)):
            cls = ProgramError
            message = f"{kind}: {message}"
        error = cls(message)
        error.servegate_trace = trace
        raise error
    if op == "call":
        calls.append(f"{what} returned {short(value)}")
    return value


def sendable(value):
    """A value for the program that is not a plain one: one of its own
    objects goes back as its reference; anything else (a function, an
    object of the tests') cannot cross."""
    if isinstance(value, Remote):
        return [object.__getattribute__(value, "_id"), object.__getattribute__(value, "_label")]
    raise TypeError(f"a {type(value).__name__} cannot be sent to the program (only plain values and its own objects: numbers, strings, bytes, lists, tuples, sets, dicts)")


class Remote:
    """An object of the program's: calls, attributes, iteration, len, items
    and truth are asked of it. It cannot be compared (== and != raise):
    the program's own answer to equality, or its identity, would decide a
    test. `x in it` iterates it here, so the program never sees `x`."""

    __slots__ = ("_id", "_label")

    def __init__(self, ident, label):
        object.__setattr__(self, "_id", ident)
        object.__setattr__(self, "_label", label)

    def __call__(self, *args, **kwargs):
        return ask("call", self, args=args, kwargs=kwargs)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return ask("getattr", self, name=name)

    def __iter__(self):
        return ask("iter", self)

    def __next__(self):
        return ask("next", self)

    def __len__(self):
        n = ask("len", self)
        if type(n) is not int:
            raise TypeError("len() of the program's object is not an int")
        return n

    def __bool__(self):
        b = ask("bool", self)
        if type(b) is not bool:
            raise TypeError("the truth of the program's object is not a bool")
        return b

    def __getitem__(self, key):
        return ask("getitem", self, key=key)

    def __eq__(self, other):
        raise TypeError(f"{self!r} cannot be compared: the program returned an object, not a plain value")

    __ne__ = __eq__
    __hash__ = object.__hash__

    def __repr__(self):
        return f"<the program's {object.__getattribute__(self, '_label')}>"


def remote_of(x, what):
    if not (isinstance(x, list) and len(x) == 2 and isinstance(x[0], int) and isinstance(x[1], str)):
        raise Refused(f"not a reference: {str(x)[:80]}")
    return Remote(x[0], f"{x[1][:80]} from {what[:120]}")


def refer(x, name):
    ident = x[0] if isinstance(x, list) and x and isinstance(x[0], int) else None
    if ident is None or not (len(x) == 2 and isinstance(x[1], str)):
        raise Refused(f"not a reference: {str(x)[:80]}")
    return Remote(ident, name)


# The standard library's modules the runner imports itself when the
# program has them: none does anything on import.
SAFE = {
    "array", "bisect", "cmath", "collections", "copy", "datetime", "decimal",
    "fractions", "functools", "hashlib", "heapq", "itertools", "json", "math",
    "numbers", "operator", "random", "re", "statistics", "string", "typing",
}


def bind(ready, job, namespace):
    """Binds the program's names in the tests' namespace: only those asked
    for (`bind`), else every one the prelude does not define (a function
    named like a builtin, `sum`, is the one the tests call by that name, as
    when they ran in its module); a
    module the program imported is imported here when it is one of the
    standard library's that do nothing on import (SAFE) or one already
    imported, so that the program cannot change what the tests use."""
    wanted = job.get("bind")
    bound = 0
    for entry in ready[:10000]:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name.isidentifier():
            raise Refused(f"not a name: {str(entry)[:80]}")
        if wanted is not None:
            if name not in wanted:
                continue
        elif name in namespace:
            continue
        if "module" in entry:
            module = entry["module"]
            if isinstance(module, str) and module in SAFE:
                namespace[name] = importlib.import_module(module)
                bound += 1
                continue
        value = entry.get("value")
        if isinstance(value, dict) and list(value) == ["r"]:
            namespace[name] = refer(value["r"], name)
        else:
            namespace[name] = decode(value, lambda x: refer(x, name))
        bound += 1
    return bound


def failed_line(error, tests):
    """The line of a test the traceback ends in (a test's function may be
    defined by an earlier test: HumanEval's check)."""
    at = None
    tb = error.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name.startswith("<test ") and name.endswith(">") and name[6:-1].isdigit():
            at = (int(name[6:-1]) - 1, tb.tb_lineno)
        tb = tb.tb_next
    if at is None or not 0 <= at[0] < len(tests):
        return None
    lines = tests[at[0]].split("\n")
    return lines[at[1] - 1].strip() if 0 < at[1] <= len(lines) else None


def main():
    job = channel.read()
    try:
        ready = channel.read()
    except Refused as e:
        say(unready=f"the program's first line is not servegate's: {e}")
        return
    if ready is None:
        say(unready="the program ended before its functions were ready")
        return
    namespace = {"__name__": "servegate_tests", "__builtins__": builtins}
    try:
        if job.get("prelude"):
            exec(compile(job["prelude"], "<prelude>", "exec"), namespace)
    except BaseException as e:
        say(broken="the prelude failed: " + "".join(traceback.format_exception_only(type(e), e)).strip()[:2000])
        return
    try:
        if not isinstance(ready, dict) or not isinstance(ready.get("ready"), list):
            raise Refused("its first line is not {ready}")
        say(ready=bind(ready["ready"], job, namespace))
    except Refused as e:
        say(unready=f"the program's names are not servegate's encoding: {e}")
        return
    for i, test in enumerate(job["tests"]):
        calls.clear()
        try:
            exec(compile(test, f"<test {i + 1}>", "exec"), namespace)
        except BaseException as e:
            said = str(e) if isinstance(e, Ended) else "".join(traceback.format_exception_only(type(e), e)).strip()
            say(
                test=i,
                line=failed_line(e, job["tests"]),
                error=said[:2000],
                ended=isinstance(e, Ended),
                trace=getattr(e, "servegate_trace", None),
                calls=calls[-3:],
            )
            return
        if broken:
            # A test caught it (a bare `except:`): it still failed.
            say(test=i, line=None, error=broken[0], ended=True, trace=None, calls=calls[-3:])
            return
        say(passed=i)
    say(done=True)


main()
