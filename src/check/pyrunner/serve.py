# servegate's part of the program (after the model's code): answers the
# test runner's requests, a JSON line each way, over the descriptor that
# was stdout (CHANNEL), on the model's module (MODULE), until the runner is
# done. The tests and their verdict are in the runner's process, never here.
import json as _json
import traceback as _traceback
import types as _types

refs = {}
# The largest value a name is exported with, and all of them together
# (`room`); a larger one goes as a reference.
SMALL = 64 << 10


def keep(value):
    refs[len(refs) + 1] = value
    return [len(refs), type(value).__name__[:80]]


def ref(x):
    if isinstance(x, list) and x and isinstance(x[0], int) and x[0] in refs:
        return refs[x[0]]
    raise Refused(f"no such reference: {str(x)[:80]}")


def exported():
    names = []
    room = 1 << 20
    for name, value in list(MODULE.items())[:10000]:
        if name.startswith("__"):
            continue
        if isinstance(value, _types.ModuleType):
            names.append({"name": name, "module": str(value.__name__), "value": {"r": keep(value)}})
            continue
        try:
            plain = encode(value, keep)
            # A big table stays here: the tests ask for what they use.
            size = len(_json.dumps(plain))
            if size > min(SMALL, room):
                raise ValueError("large")
            room -= size
            names.append({"name": name, "value": plain})
        except Exception:
            names.append({"name": name, "value": {"r": keep(value)}})
    return names


def answer(request):
    op = request["op"]
    target = ref(request["ref"])
    if op == "call":
        args = decode(request["args"], ref)
        kwargs = decode(request["kwargs"], ref)
        return target(*args, **kwargs)
    if op == "getattr":
        return getattr(target, request["name"])
    if op == "iter":
        return iter(target)
    if op == "next":
        return next(target)
    if op == "len":
        return len(target)
    if op == "bool":
        return bool(target)
    if op == "getitem":
        return target[decode(request["key"], ref)]
    raise Refused(f"no such request: {op!r}")


def serve():
    lines = Lines(CHANNEL)
    lines.write({"ready": exported()})
    while True:
        request = lines.read()
        if request is None:
            return
        try:
            reply = {"ok": encode(answer(request), keep)}
        except BaseException as e:
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            trace = "".join(_traceback.format_exception(type(e), e, e.__traceback__.tb_next))
            reply = {"raise": [type(e).__name__[:80], str(e)[:2000], trace[-4000:]]}
        if len(_json.dumps(reply)) > LINE:
            reply = {"raise": ["ValueError", f"the answer to {request.get('op')} is over the {LINE >> 20} MiB a value may cross", ""]}
        lines.write(reply)


serve()
