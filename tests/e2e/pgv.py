"""Envoy's proto validation rules (protoc-gen-validate's ``validate.rules`` field options, carried by
the xds-protos descriptors) evaluated on decoded messages, recursing into ``Any``-packed typed configs.

Envoy runs exactly these checks on every resource it accepts; no Envoy binary can be had here, so the
tests run them instead. ``protoc-gen-validate``'s Python validator (PyPI 1.3.3) would be the maintained
library, but it reads ``FieldDescriptor.label``, which protobuf 7 (pinned for xds-protos) no longer
has, and ``protovalidate`` reads the newer ``buf.validate`` options, which Envoy's protos do not carry.

Covered: message ``required``/``skip``, oneof ``required``, every numeric kind and the wrapper types
(``const``, ``lt``/``lte``/``gt``/``gte``, ``in``/``not_in``), ``bool.const``, enum
``defined_only``/``in``/``not_in``/``const``, string and bytes lengths, ``const``, ``pattern``,
``prefix``/``suffix``/``contains``/``not_contains``, ``in``/``not_in`` and the well-known
``HTTP_HEADER_NAME``/``HTTP_HEADER_VALUE`` regexes, ``repeated`` (items count, ``unique``, per-item
rules), ``map`` (pairs count, key and value rules), ``any.required``/``in``, ``duration`` (``required``
and bounds), and the message options ``validate.disabled``/``ignored``. Anything else in an option is
reported as unsupported, so a rule is never skipped silently."""

from __future__ import annotations

import importlib
import pkgutil
import re

from google.protobuf import any_pb2, descriptor, duration_pb2, message, symbol_database
from google.protobuf.descriptor import FieldDescriptor as FD
from validate import validate_pb2

_NUMERIC = {"float", "double", "int32", "int64", "uint32", "uint64", "sint32", "sint64", "fixed32", "fixed64",
            "sfixed32", "sfixed64"}
_WRAPPERS = {"google.protobuf.DoubleValue", "google.protobuf.FloatValue", "google.protobuf.Int64Value",
             "google.protobuf.UInt64Value", "google.protobuf.Int32Value", "google.protobuf.UInt32Value",
             "google.protobuf.BoolValue", "google.protobuf.StringValue", "google.protobuf.BytesValue"}
# validate.proto's KnownRegex, strict and lax (RFC 7230 token / field-value).
_HEADER_NAME = re.compile(r"^:?[0-9a-zA-Z!#$%&'*+\-.^_|~`]+$")
_HEADER_VALUE = re.compile(r"^[^\x00-\x08\x0A-\x1F\x7F]*$")
_LAX = re.compile(r"^[^\x00\n\r]*$")
_HANDLED = {
    "string": {"const", "len", "min_len", "max_len", "len_bytes", "min_bytes", "max_bytes", "pattern", "prefix",
               "suffix", "contains", "not_contains", "in", "not_in", "well_known_regex", "strict", "ignore_empty"},
    "bytes": {"const", "len", "min_len", "max_len", "pattern", "prefix", "suffix", "contains", "in", "not_in",
              "ignore_empty"},
    "enum": {"const", "defined_only", "in", "not_in"},
    "repeated": {"min_items", "max_items", "unique", "items", "ignore_empty"},
    "map": {"min_pairs", "max_pairs", "keys", "values", "ignore_empty", "no_sparse"},
    "any": {"required", "in", "not_in"},
    "duration": {"required", "const", "lt", "lte", "gt", "gte", "in", "not_in"},
    "bool": {"const"},
}


def check(msg: message.Message, path: str = "") -> list[str]:
    """Every violation in ``msg`` and what it contains, as ``path: reason``."""
    out: list[str] = []
    _message(msg, path or msg.DESCRIPTOR.name, out)
    return out


def _rules(field: descriptor.FieldDescriptor) -> validate_pb2.FieldRules | None:
    opts = field.GetOptions()
    return opts.Extensions[validate_pb2.rules] if opts.HasExtension(validate_pb2.rules) else None


def _message(msg: message.Message, path: str, out: list[str]) -> None:
    d = msg.DESCRIPTOR
    mopts = d.GetOptions()
    if mopts.HasExtension(validate_pb2.disabled) and mopts.Extensions[validate_pb2.disabled]:
        return
    if mopts.HasExtension(validate_pb2.ignored) and mopts.Extensions[validate_pb2.ignored]:
        return
    if d.full_name == "google.protobuf.Any":
        _any_payload(msg, path, out)
        return
    for oneof in d.oneofs:
        o = oneof.GetOptions()
        if o.HasExtension(validate_pb2.required) and o.Extensions[validate_pb2.required]:
            if msg.WhichOneof(oneof.name) is None:
                out.append(f"{path}.{oneof.name}: one of its fields is required")
    for field in d.fields:
        fpath = f"{path}.{field.name}"
        rules = _rules(field)
        if field.is_repeated:
            value = getattr(msg, field.name)
            if _is_map(field):
                _map(field, value, rules, fpath, out)
            else:
                _repeated(field, value, rules, fpath, out)
            continue
        if field.containing_oneof is not None and msg.WhichOneof(field.containing_oneof.name) != field.name:
            continue  # an unset oneof member is not validated
        if field.type == FD.TYPE_MESSAGE:
            value = getattr(msg, field.name) if msg.HasField(field.name) else None
            _message_field(field, value, rules, fpath, out)
        elif rules is not None:
            _scalar(field, getattr(msg, field.name), rules, fpath, out)


def _is_map(field) -> bool:
    return field.type == FD.TYPE_MESSAGE and field.message_type.GetOptions().map_entry


def _message_field(field, value, rules, path, out) -> None:
    kind = rules.WhichOneof("type") if rules is not None else None
    # `message` is beside the `type` oneof in validate.proto: it combines with any of them.
    mrules = rules.message if rules is not None and rules.HasField("message") else None
    if mrules is not None and mrules.skip:
        return
    required = (mrules is not None and mrules.required) or (kind == "any" and rules.any.required) or (
        kind == "duration" and rules.duration.required)
    if value is None:
        if required:
            out.append(f"{path}: value is required")
        return
    if kind is not None:
        _unsupported(rules, kind, path, out)
    name = field.message_type.full_name
    if name in _WRAPPERS and kind in _NUMERIC | {"string", "bytes", "bool"}:
        _value_rules(kind, getattr(rules, kind), value.value, field.message_type.fields_by_name["value"], path, out)
    elif kind == "duration":
        _duration(rules.duration, value, path, out)
    elif kind == "any":
        _any_rules(rules.any, value, path, out)
    _message(value, path, out)


def _scalar(field, value, rules, path, out) -> None:
    kind = rules.WhichOneof("type")
    if kind is None:
        return
    _unsupported(rules, kind, path, out)
    _value_rules(kind, getattr(rules, kind), value, field, path, out)


def _value_rules(kind, r, value, field, path, out) -> None:
    if kind in _NUMERIC:
        _numeric(r, value, path, out)
    elif kind == "bool":
        if r.HasField("const") and value != r.const:
            out.append(f"{path}: must be {r.const}")
    elif kind == "enum":
        _enum(r, value, field, path, out)
    elif kind in ("string", "bytes"):
        _text(kind, r, value, path, out)


def _numeric(r, v, path, out) -> None:
    if r.HasField("const") and v != r.const:
        out.append(f"{path}: {v} must equal {r.const}")
    lo = ("gt", r.gt) if r.HasField("gt") else ("gte", r.gte) if r.HasField("gte") else None
    hi = ("lt", r.lt) if r.HasField("lt") else ("lte", r.lte) if r.HasField("lte") else None
    ok_lo = lo is None or (v > lo[1] if lo[0] == "gt" else v >= lo[1])
    ok_hi = hi is None or (v < hi[1] if hi[0] == "lt" else v <= hi[1])
    # PGV: lo > hi means "outside the range" (exclusive).
    if lo is not None and hi is not None and lo[1] > hi[1]:
        if not (ok_lo or ok_hi):
            out.append(f"{path}: {v} must be outside {hi}..{lo}")
    elif not (ok_lo and ok_hi):
        out.append(f"{path}: {v} out of range {lo} {hi}")
    if list(getattr(r, "in")) and v not in getattr(r, "in"):
        out.append(f"{path}: {v} not in {list(getattr(r, 'in'))}")
    if v in r.not_in:
        out.append(f"{path}: {v} in {list(r.not_in)}")


def _enum(r, v, field, path, out) -> None:
    if r.defined_only and field.enum_type.values_by_number.get(v) is None:
        out.append(f"{path}: {v} is not a defined {field.enum_type.full_name}")
    if r.HasField("const") and v != r.const:
        out.append(f"{path}: {v} must equal {r.const}")
    if list(getattr(r, "in")) and v not in getattr(r, "in"):
        out.append(f"{path}: {v} not in {list(getattr(r, 'in'))}")
    if v in r.not_in:
        out.append(f"{path}: {v} in {list(r.not_in)}")


def _text(kind, r, v, path, out) -> None:
    if r.ignore_empty and not v:
        return
    n = len(v)  # characters (string) or bytes
    b = len(v.encode()) if kind == "string" else n
    checks = [("const", lambda c: v == c), ("len", lambda c: n == c), ("min_len", lambda c: n >= c),
              ("max_len", lambda c: n <= c), ("prefix", lambda c: v.startswith(c)),
              ("suffix", lambda c: v.endswith(c)), ("contains", lambda c: c in v),
              ("pattern", lambda c: re.search(c, v if kind == "string" else v.decode("latin-1")) is not None)]
    if kind == "string":
        checks += [("len_bytes", lambda c: b == c), ("min_bytes", lambda c: b >= c), ("max_bytes", lambda c: b <= c),
                   ("not_contains", lambda c: c not in v)]
    for name, ok in checks:
        if r.HasField(name) and not ok(getattr(r, name)):
            out.append(f"{path}: {v!r} fails {name} {getattr(r, name)!r}")
    if list(getattr(r, "in")) and v not in getattr(r, "in"):
        out.append(f"{path}: {v!r} not in {list(getattr(r, 'in'))}")
    if v in r.not_in:
        out.append(f"{path}: {v!r} in {list(r.not_in)}")
    if kind == "string" and r.HasField("well_known_regex"):
        strict = r.strict if r.HasField("strict") else True
        known = validate_pb2.KnownRegex.Name(r.well_known_regex)
        regex = (_HEADER_NAME if known == "HTTP_HEADER_NAME" else _HEADER_VALUE) if strict else _LAX
        if known != "UNKNOWN" and not regex.match(v):
            out.append(f"{path}: {v!r} is not a valid {known}")


def _repeated(field, values, rules, path, out) -> None:
    kind = rules.WhichOneof("type") if rules is not None else None
    if kind is not None:
        _unsupported(rules, kind, path, out)
    r = rules.repeated if kind == "repeated" else None
    if r is not None and not (r.ignore_empty and not values):
        if r.HasField("min_items") and len(values) < r.min_items:
            out.append(f"{path}: {len(values)} items, at least {r.min_items} required")
        if r.HasField("max_items") and len(values) > r.max_items:
            out.append(f"{path}: {len(values)} items, at most {r.max_items} allowed")
        if r.unique:
            seen = [v.SerializeToString(deterministic=True) if field.type == FD.TYPE_MESSAGE else v for v in values]
            if len(set(seen)) != len(seen):
                out.append(f"{path}: items must be unique")
    items = r.items if r is not None and r.HasField("items") else None
    for i, v in enumerate(values):
        ipath = f"{path}[{i}]"
        if field.type == FD.TYPE_MESSAGE:
            _message_field(field, v, items, ipath, out)
        elif items is not None:
            _scalar(field, v, items, ipath, out)


def _map(field, values, rules, path, out) -> None:
    kind = rules.WhichOneof("type") if rules is not None else None
    if kind is not None:
        _unsupported(rules, kind, path, out)
    r = rules.map if kind == "map" else None
    if r is not None and not (r.ignore_empty and not values):
        if r.HasField("min_pairs") and len(values) < r.min_pairs:
            out.append(f"{path}: {len(values)} pairs, at least {r.min_pairs} required")
        if r.HasField("max_pairs") and len(values) > r.max_pairs:
            out.append(f"{path}: {len(values)} pairs, at most {r.max_pairs} allowed")
    key_f, val_f = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
    for k in values:
        kpath = f"{path}[{k!r}]"
        if r is not None and r.HasField("keys"):
            _scalar(key_f, k, r.keys, kpath, out)
        v = values[k]
        vr = r.values if r is not None and r.HasField("values") else None
        if val_f.type == FD.TYPE_MESSAGE:
            _message_field(val_f, v, vr, kpath, out)
        elif vr is not None:
            _scalar(val_f, v, vr, kpath, out)


def _duration(r, d: duration_pb2.Duration, path, out) -> None:
    ns = d.seconds * 10**9 + d.nanos

    def n(x):
        return x.seconds * 10**9 + x.nanos

    for name, ok in (("const", lambda c: ns == n(c)), ("lt", lambda c: ns < n(c)), ("lte", lambda c: ns <= n(c)),
                     ("gt", lambda c: ns > n(c)), ("gte", lambda c: ns >= n(c))):
        if r.HasField(name) and not ok(getattr(r, name)):
            out.append(f"{path}: {ns}ns fails {name} {n(getattr(r, name))}ns")
    if list(getattr(r, "in")) and ns not in [n(x) for x in getattr(r, "in")]:
        out.append(f"{path}: {ns}ns not in the allowed durations")
    if ns in [n(x) for x in r.not_in]:
        out.append(f"{path}: {ns}ns is a forbidden duration")


def _any_rules(r, a: any_pb2.Any, path, out) -> None:
    if list(getattr(r, "in")) and a.type_url not in getattr(r, "in"):
        out.append(f"{path}: type {a.type_url} not in {list(getattr(r, 'in'))}")
    if a.type_url in r.not_in:
        out.append(f"{path}: type {a.type_url} is forbidden")


def _unsupported(rules, kind, path, out) -> None:
    handled = _HANDLED.get(kind, {"const", "lt", "lte", "gt", "gte", "in", "not_in", "ignore_empty"})
    rest = {f.name for f, _ in getattr(rules, kind).ListFields()} - handled
    if rest:
        out.append(f"{path}: unsupported {kind} rules {sorted(rest)} (extend pgv.py)")


def _any_payload(a: any_pb2.Any, path, out) -> None:
    name = a.type_url.rsplit("/", 1)[-1]
    cls = message_class(name)
    if cls is None:
        out.append(f"{path}: unknown type {a.type_url} (cannot be validated)")
        return
    inner = cls()
    if not a.Unpack(inner):
        out.append(f"{path}: does not unpack as {name}")
        return
    _message(inner, f"{path}<{name}>", out)


def message_class(full_name: str):
    """The generated class of ``full_name``, importing its xds-protos package's modules on demand."""
    db = symbol_database.Default()
    try:
        return db.GetSymbol(full_name)
    except KeyError:
        pass
    package = full_name.rsplit(".", 1)[0]
    try:
        pkg = importlib.import_module(package)
    except ImportError:
        return None
    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.name.endswith("_pb2"):
            importlib.import_module(f"{package}.{mod.name}")
    try:
        return db.GetSymbol(full_name)
    except KeyError:
        return None
