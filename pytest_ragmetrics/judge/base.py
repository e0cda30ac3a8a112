"""The judge contract: a :class:`JudgeRequest` goes in, a validated :class:`JudgeAnswer` comes out.

A request fully describes one judgment (kind, prompt version, model, sampling parameters, the strict
JSON schema of a scorable answer and the normalized inputs), so its :meth:`JudgeRequest.cache_key` is a
pure function of everything that determines the answer. Which chunk rank or threshold the answer is
later used for is deliberately *not* part of it.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Generic, Literal, ParamSpec, Protocol, TypeVar, overload, runtime_checkable

from .._files import json_type
from ..errors import InvalidJudgeAnswer

#: Bump when the layout of the cache key changes, so old entries simply stop matching.
KEY_FORMAT = 1

Source = Literal["judge", "cache", "store"]
T = TypeVar("T")
P = ParamSpec("P")

#: ``how_to_set(name, value)``: how a message tells the user to set setting ``name`` to ``value`` where
#: the judge runs (a command-line option inside pytest, ``Settings(...)`` in a script). The judge knows
#: no settings itself: whoever builds it passes the wording in.
HowToSet = Callable[[str, Any], str]


def by_environment(name: str, value: Any) -> str:
    """The wording of a judge built by hand: the environment variable, which works everywhere."""
    return f"RAGMETRICS_{name.upper()}={value}"


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no insignificant whitespace: the form that is hashed."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def plain_json_encoder(encoder: json.JSONEncoder) -> Callable[[Any], str]:
    """``encoder.encode`` for plain JSON data, with json's C encoder (where built) made once rather
    than once per call, which costs a warm run as much as the encoding itself. No cycle check: keys
    and samples hold plain text, numbers, lists and dicts."""
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None or encoder.ensure_ascii or encoder.indent is not None:
        return encoder.encode
    c_encoder = make(
        None,  # markers: no cycle check
        encoder.default,
        json.encoder.encode_basestring,
        None,  # indent
        encoder.key_separator,
        encoder.item_separator,
        encoder.sort_keys,
        encoder.skipkeys,
        encoder.allow_nan,
    )

    def encode(value: Any) -> str:
        return "".join(c_encoder(value, 0))

    return encode


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_key_json = plain_json_encoder(_ENCODER)  # canonical_json, for the key inputs that are not texts


#: The JSON of a text (``json.dumps(text, ensure_ascii=False)``), kept for the texts recent key
#: inputs held (a question, a chunk, a reference sentence): the requests of one sample are keyed on
#: the same few texts (its question in every one of them), and the engine writes them once more into
#: the sample's content keys; encoding each text again is most of the cost of a key text. json's own
#: encoder of a text (C where built) behind an LRU that is C too, so a key of texts alone is put
#: together without a Python call per text.
text_json: Callable[[str], str] = functools.lru_cache(maxsize=4096)(json.encoder.encode_basestring)
# By the names of key inputs as they come: the key text's template (the names sorted and written as
# canonical_json writes them, a ``%s`` for each value), the names in that order, and whether their
# values have all been texts so far (a list of texts under these names makes it False for good);
# False for names that are not all text.
_LAYOUTS: dict[tuple[Any, ...], tuple[str, tuple[str, ...], bool] | Literal[False]] = {}


def _inputs_json(inputs: dict[Any, Any]) -> str:
    """``canonical_json(inputs)``, each text in it (a value, an item of a list) encoded once while
    :func:`text_json` keeps it; any other value through json's C encoder."""
    names = tuple(inputs)
    layout = _LAYOUTS.get(names)
    if layout is None:
        layout = _layout(names)
    if layout is False:
        return _ENCODER.encode(inputs)  # json's own handling of names that are not text
    template, order, texts = layout
    if texts:
        try:
            return template % tuple(map(text_json, map(inputs.__getitem__, order)))
        except TypeError:  # a value that is not a text: these names go the way below from now on
            # (a recall request's lists of texts would otherwise raise an error for every key)
            _LAYOUTS[names] = (template, order, False)
    values = []
    for name in order:
        value = inputs[name]
        if type(value) is list:
            try:
                values.append("[" + ",".join(map(text_json, value)) + "]")
                continue
            except TypeError:  # an item that is not a text
                pass
        elif type(value) is str:
            values.append(text_json(value))
            continue
        values.append(_key_json(value))
    return template % tuple(values)


def _layout(names: tuple[Any, ...]) -> tuple[str, tuple[str, ...], bool] | Literal[False]:
    """The entry of :data:`_LAYOUTS` for ``names``, made and kept."""
    layout: tuple[str, tuple[str, ...], bool] | Literal[False] = False
    if all(type(name) is str for name in names):
        order = tuple(sorted(names))
        slots = [_ENCODER.encode(name).replace("%", "%%") + ":%s" for name in order]
        layout = ("{" + ",".join(slots) + "}", order, True)
    if len(_LAYOUTS) >= 256:
        _LAYOUTS.clear()
    _LAYOUTS[names] = layout
    return layout


# Canonical JSON of schema objects seen recently, by identity (the entry keeps its schema alive, so
# the id cannot be reused while it is here). Built-in requests share one schema object per shape.
_SCHEMA_JSON: dict[int, tuple[Mapping[str, Any], str]] = {}
# The fixed parts of canonical key texts, by (kind, model, n, prompt version, seed, temperature).
_KEY_PARTS: dict[tuple[Any, ...], tuple[str, str, str]] = {}


def _schema_json(schema: Mapping[str, Any]) -> str:
    """``',"schema":' + canonical_json(schema)``: the schema's part of a key text."""
    hit = _SCHEMA_JSON.get(id(schema))
    if hit is not None and hit[0] is schema:
        return hit[1]
    text = ',"schema":' + _ENCODER.encode(schema)
    if len(_SCHEMA_JSON) >= 256:
        _SCHEMA_JSON.clear()
    _SCHEMA_JSON[id(schema)] = (schema, text)
    return text


def _key_parts(
    kind: str, model: str, n: int, prompt_version: str, seed: int | None, temperature: float
) -> tuple[str, str, str]:
    """The parts of a key text around its inputs and schema: the same for every request of one
    kind, prompt version and judge."""
    head = (kind, model, n, prompt_version, seed, temperature)
    parts = _KEY_PARTS.get(head)
    if parts is None:
        encode = _ENCODER.encode
        parts = (
            f'{{"format":{KEY_FORMAT},"inputs":',
            f',"kind":{encode(kind)},"model":{encode(model)},"n":{encode(n)},'
            f'"prompt_version":{encode(prompt_version)}',
            f',"seed":{encode(seed)},"temperature":{encode(temperature)}}}',
        )
        if len(_KEY_PARTS) >= 256:
            _KEY_PARTS.clear()
        _KEY_PARTS[head] = parts
    return parts


@dataclass(frozen=True)
class JudgeRequest:
    """One judgment to be made by the judge.

    ``messages`` are the chat messages sent to the model; ``inputs`` are the normalized texts they
    were built from (question, reference sentences, chunk text), kept for the cache key and for the
    human-readable judgment store. ``label`` only names the request in error messages.

    ``key_inputs``, when given, is what the cache key hashes instead of ``inputs`` and ``schema``:
    the inputs everything else follows from. A chunk's sentence judgment is keyed on the chunk and
    the splitter's identity, so finding its recorded answer needs no splitting; the inputs derived
    from them (``derived``: the sentences) are recorded with the answer.
    """

    kind: str
    prompt_version: str
    model: str
    messages: tuple[Mapping[str, str], ...]
    schema_name: str
    schema: Mapping[str, Any]
    inputs: Mapping[str, Any]
    temperature: float = 0.0
    seed: int | None = 0
    n: int = 1
    label: str = field(default="", compare=False)
    key_inputs: Mapping[str, Any] | None = None

    #: Names of the ``inputs`` that follow from ``key_inputs`` (recorded with the answer).
    derived: tuple[str, ...] = field(default=(), init=False, repr=False, compare=False)

    def key_material(self) -> dict[str, Any]:
        """Everything that determines the answer, as a JSON-able dict."""
        material = {
            "format": KEY_FORMAT,
            "kind": self.kind,
            "prompt_version": self.prompt_version,
            "model": self.model,
            "temperature": self.temperature,
            "seed": self.seed,
            "n": self.n,
        }
        if self.key_inputs is not None:
            material["inputs"] = self.key_inputs
        else:
            material["schema"] = self.schema
            material["inputs"] = self.inputs
        return material

    def cache_key(self) -> str:
        """A sha256 hex digest of :meth:`key_material`."""
        attributes = self.__dict__
        cached = attributes.get("_key")
        if cached is None:
            # surrogatepass: a lone surrogate (a "\\ud800" escape in a sample file) keys like any text.
            text = self._canonical_key().encode("utf-8", "surrogatepass")
            cached = attributes["_key"] = hashlib.sha256(text).hexdigest()  # frozen: not through setattr
        return cached

    def _canonical_key(self) -> str:
        # canonical_json(self.key_material()), assembled by hand (tests check it is the same text):
        # a warm run computes a key per judgment, and all but the inputs repeat from one to the next.
        if self.key_inputs is not None:
            inputs, schema = self.key_inputs, ""
        else:
            inputs, of = self.inputs, self.schema
            hit = _SCHEMA_JSON.get(id(of))  # _schema_json(of), without a call when known
            schema = hit[1] if hit is not None and hit[0] is of else _schema_json(of)
        parts = self.__dict__.get("_key_parts")  # a request of a shape has them from it
        if parts is None:
            parts = _key_parts(
                self.kind, self.model, self.n, self.prompt_version, self.seed, self.temperature
            )
        encoded = _inputs_json(inputs) if type(inputs) is dict else _ENCODER.encode(inputs)
        return "".join((parts[0], encoded, parts[1], schema, parts[2]))

    def derived_inputs(self) -> dict[str, Any]:
        """The derived inputs (see :attr:`derived`), to be recorded with the answer."""
        inputs = self.inputs
        return {name: inputs[name] for name in self.derived}

    def provide(self, derived: Any, *, checked: bool = False) -> Mapping[str, Any] | None:
        """Take the derived inputs recorded with an answer instead of deriving them again, and return
        them as taken (what the answer keeps: :meth:`derived_inputs`, without building it again).

        Raises :class:`ValueError` when ``derived`` does not hold them. ``checked``: they were
        checked when their answer entered the run (read from disk, or derived here), so they are
        not checked again. A request without derived inputs needs nothing, and one that holds its
        own already takes nothing: both ignore ``derived`` and return None.
        """
        return None


class _built_once(Generic[T]):
    """A request attribute built by ``build(request)`` when first read, then kept in the request's
    ``__dict__``, where later reads find it without calling anything (as ``functools.cached_property``
    does, without its lock: a request is built and read on one thread)."""

    def __init__(self, build: Callable[[Any], T]) -> None:
        self.build = build
        self.name = build.__name__

    @overload
    def __get__(self, request: None, owner: type[Any] | None = None) -> _built_once[T]: ...
    @overload
    def __get__(self, request: object, owner: type[Any] | None = None) -> T: ...
    def __get__(self, request: object | None, owner: type[Any] | None = None) -> Any:
        if request is None:
            return self
        value = request.__dict__[self.name] = self.build(request)
        return value


class DeferredRequest(JudgeRequest):
    """A :class:`JudgeRequest` that builds its messages, schema and derived inputs when first needed
    (built with :meth:`of`).

    A warm run finds nearly every answer recorded, and finding one takes only the cache key: the
    chat messages (a JSON rendering) are built for a judge call only, and derived inputs (a chunk's
    sentences) are computed only when no recorded answer brings them along (:meth:`provide`).

    ``base_inputs`` are the inputs given up front; ``derive()`` returns the ones derived from them,
    named by ``derived``. With ``derived`` the cache key is taken over ``base_inputs`` alone (they
    become ``key_inputs``). ``schema_for(inputs)`` and ``render(inputs)`` build the schema
    and the messages from the full inputs; ``check_derived(values)`` raises :class:`ValueError` for recorded
    derived inputs that cannot be right.
    """

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if "messages" in kwargs:
            # dataclasses.replace() passes every field: the result is an ordinary, complete request.
            return JudgeRequest(*args, **kwargs)
        return super().__new__(cls)

    @staticmethod
    def shape(
        kind: str,
        prompt_version: str,
        model: str,
        schema_name: str,
        schema_for: Callable[[Mapping[str, Any]], Mapping[str, Any]],
        render: Callable[[Mapping[str, Any]], tuple[Mapping[str, str], ...]],
        temperature: float,
        seed: int | None,
        n: int,
    ) -> dict[str, Any]:
        """What the requests of one kind, prompt and judge hold alike, for :meth:`of`: made once
        and copied into each request (a warm run builds thousands to learn their keys)."""
        return {
            "kind": kind,
            "prompt_version": prompt_version,
            "model": model,
            "schema_name": schema_name,
            "temperature": temperature,
            "seed": seed,
            "n": n,
            "key_inputs": None,
            "derived": (),
            "_schema_for": schema_for,
            "_render": render,
            "_derive": None,
            "_check": None,
            "_key_parts": _key_parts(kind, model, n, prompt_version, seed, temperature),
        }

    @classmethod
    def of(
        cls,
        shape: dict[str, Any],
        base_inputs: Mapping[str, Any],
        label: str,
        derive: Callable[[], Mapping[str, Any]] | None = None,
        derived: tuple[str, ...] = (),
        check_derived: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> DeferredRequest:
        """The request of ``shape`` (see :meth:`shape`) over ``base_inputs``."""
        attributes = shape.copy()
        attributes["label"] = label
        attributes["_base"] = base_inputs
        if derived:  # keyed on its base inputs, what it derives from them recorded with the answer
            attributes["key_inputs"] = base_inputs
            attributes["derived"] = derived
            attributes["_derive"] = derive
            attributes["_check"] = check_derived
        else:  # keyed on its full inputs: the key needs the schema at once
            attributes["inputs"] = base_inputs
            attributes["schema"] = shape["_schema_for"](base_inputs)
        request: DeferredRequest = object.__new__(cls)
        object.__setattr__(request, "__dict__", attributes)  # frozen: no __setattr__
        return request

    # The dataclass fields built when first read: from then on plain attributes of the request, read
    # without a call (a warm run reads a request's inputs often).
    @_built_once
    def inputs(self) -> Mapping[str, Any]:
        attributes = self.__dict__
        derive = attributes["_derive"]
        inputs = {**attributes["_base"], **(derive() if derive is not None else {})}
        attributes["_derive"] = None  # what derives the inputs (a chunk, a splitter) is let go
        return inputs

    @_built_once
    def schema(self) -> Mapping[str, Any]:
        return self.__dict__["_schema_for"](self.inputs)  # type: ignore[no-any-return]

    @_built_once
    def messages(self) -> tuple[Mapping[str, str], ...]:
        return self.__dict__["_render"](self.inputs)  # type: ignore[no-any-return]

    def provide(self, derived: Any, *, checked: bool = False) -> Mapping[str, Any] | None:
        names = self.derived
        if not names:
            return None
        attributes = self.__dict__
        if "inputs" in attributes:  # derived here, or taken from an answer before
            return None
        values: Mapping[str, Any]
        if checked:
            values = derived
        else:
            if type(derived) is not dict and not isinstance(derived, Mapping):
                raise ValueError(f"the recorded answer lacks the derived inputs ({', '.join(names)})")
            try:
                values = {name: derived[name] for name in names}
            except KeyError:
                raise ValueError(
                    f"the recorded answer lacks the derived inputs ({', '.join(names)})"
                ) from None
            check = attributes["_check"]
            if check is not None:
                check(values)
        # Taken from the recorded answer: the deriving function (and what it holds) is let go.
        attributes["inputs"] = {**attributes["_base"], **values}
        attributes["_derive"] = None
        return values


class _Factory:
    """Stands for a default made by a factory in a signature, as in the one ``dataclass`` writes."""

    def __repr__(self) -> str:
        return "<factory>"


def quick_init(cls: Callable[P, T]) -> Callable[P, T]:
    """Give a frozen, slotted dataclass an ``__init__`` that sets its fields as plain attributes, and
    return a function that makes an object of ``cls`` as ``cls(...)`` does, without the class call.

    The ``__init__`` ``dataclass`` writes calls ``object.__setattr__`` per field (the class is frozen),
    and even a call per field through its slot's descriptor costs far more than storing an attribute;
    a warm run builds an answer per judgment read, a verdict per judged item and a result per score,
    tens of thousands. So a new object of ``cls`` takes, while its fields are set, a plain class with
    the same slots (the same layout, nothing frozen), where setting a field is an ordinary store, and
    then its own class back: two class changes instead of a call per field, about half the cost of a
    verdict. An object of a subclass (which may have another layout), or of a class of few fields,
    has each field set through its slot. The same parameters, defaults, default factories and
    ``__post_init__``.

    The function returned makes the object as the plain class and gives it its class once, without
    ``type.__call__`` and the call of ``__init__`` through its slot (a third less than ``cls(...)``
    for a verdict): for the places that make thousands. Same parameters, same object.
    """
    namespace: dict[str, Any] = {"FACTORY": _Factory(), "cls": cls, "set_class": object.__setattr__}
    params, body, plain, by_slot = [], [], [], []
    for f in fields(cls):  # type: ignore[arg-type]  # a dataclass
        namespace[f"set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default is not MISSING:
            namespace[f"default_{f.name}"] = f.default
            params.append(f"{f.name}=default_{f.name}")
        elif f.default_factory is not MISSING:
            namespace[f"make_{f.name}"] = f.default_factory
            params.append(f"{f.name}=FACTORY")
            body.append(f"    if {f.name} is FACTORY: {f.name} = make_{f.name}()")
        else:
            params.append(f.name)
        plain.append(f"        self.{f.name} = {f.name}")
        by_slot.append(f"    set_{f.name}(self, {f.name})")
    factories = list(body)
    twin = unfrozen(cls)  # type: ignore[arg-type]  # a dataclass
    namespace["Unfrozen"], namespace["new"] = twin, object.__new__
    if twin is None or len(plain) <= _FEW_FIELDS:
        body += by_slot
    else:
        body += ["    if type(self) is cls:", "        set_class(self, '__class__', Unfrozen)", *plain]
        body += ["        self.__class__ = cls", "    else:", *("    " + line for line in by_slot)]
    post_init = ["    self.__post_init__()"] if hasattr(cls, "__post_init__") else []
    body += post_init
    exec(f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body), namespace)  # our own fields
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__, init.__annotations__ = cls.__init__.__doc__, dict(cls.__init__.__annotations__)
    cls.__init__ = init  # type: ignore[method-assign]
    if twin is None:
        return cls
    made = [*factories, "    self = new(Unfrozen)", *(line[4:] for line in plain), "    self.__class__ = cls"]
    made += [*post_init, "    return self"]
    exec(f"def make({', '.join(params)}):\n" + "\n".join(made), namespace)  # our own fields
    make: Callable[..., T] = namespace["make"]
    make.__qualname__ = make.__name__ = f"new_{cls.__name__}"
    return make


#: Fields below which two class changes cost more than setting each field through its slot.
_FEW_FIELDS = 3


def unfrozen(cls: type[Any]) -> type[Any] | None:
    """A plain class with the slots of ``cls``, which an object of ``cls`` can take as its class and
    give back (one per class); None where Python refuses that change (another layout)."""
    if cls in _TWINS:
        return _TWINS[cls]
    twin: type[Any] | None = type(
        cls.__name__, (), {"__slots__": cls.__slots__, "__module__": cls.__module__}
    )
    probe = object.__new__(cls)
    try:
        object.__setattr__(probe, "__class__", twin)
        probe.__class__ = cls
    except TypeError:
        twin = None
    _TWINS[cls] = twin
    return twin


_TWINS: dict[type[Any], type[Any] | None] = {}


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one judgment (summed over its choices)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens
        )


_new_usage = quick_init(Usage)  # Usage(...) without the class call: one per recorded answer read


@dataclass(frozen=True, slots=True)
class JudgeAnswer:
    """A validated answer: ``choices`` holds ``request.n`` answers, each conforming to the schema."""

    choices: tuple[Mapping[str, Any], ...]
    usage: Usage = Usage()
    model: str = ""
    judged_at: str = ""
    source: Source = "judge"
    #: The request's derived inputs the answer was given for (see :attr:`JudgeRequest.derived`).
    derived: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def cached(self) -> bool:
        """True when the answer came from the disk cache or the judgment store, not a judge call."""
        return self.source != "judge"

    def to_json(self) -> dict[str, Any]:
        """The JSON form written to the cache and the judgment store (``source`` is not part of it)."""
        return {
            "choices": [dict(c) for c in self.choices],
            "usage": {
                "prompt_tokens": self.usage.prompt_tokens,
                "completion_tokens": self.usage.completion_tokens,
            },
            "model": self.model,
            "judged_at": self.judged_at,
        }

    @classmethod
    def from_json(cls, data: Any, source: Source, derived: Mapping[str, Any] | None = None) -> JudgeAnswer:
        """Rebuild an answer written by :meth:`to_json`.

        ``data`` comes from files people can edit by hand, so every field's JSON type is checked;
        anything else raises :class:`ValueError` saying which field is wrong (never an
        ``AttributeError`` from deep inside). The choices are not checked against a schema here: the
        caller knows the request.
        """
        if type(data) is dict:
            # The shape every recorded answer has, checked in one go (a warm run rebuilds thousands);
            # anything else takes the field-by-field checks below, which say what is wrong.
            choices, usage = data.get("choices"), data.get("usage", {})
            model, judged_at = data.get("model", ""), data.get("judged_at", "")
            if (
                type(choices) is list
                and type(usage) is dict
                and type(model) is str
                and type(judged_at) is str
                and all(type(c) is dict for c in choices)
            ):
                prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
                if (
                    type(prompt) is int
                    and type(completion) is int
                    and 0 <= prompt <= MAX_TOKEN_COUNT
                    and 0 <= completion <= MAX_TOKEN_COUNT
                ):
                    return cls(tuple(choices), Usage(prompt, completion), model, judged_at, source, derived)
        if not isinstance(data, Mapping):
            raise ValueError(f"the answer is {json_type(data)}, not an object")
        if "choices" not in data:
            raise ValueError("the answer has no 'choices'")
        choices = data["choices"]
        if not isinstance(choices, list):
            raise ValueError(f"'choices' is {json_type(choices)}, not an array")
        for i, choice in enumerate(choices):
            if not isinstance(choice, Mapping):
                raise ValueError(f"choice {i} is {json_type(choice)}, not an object")
        usage = data.get("usage")
        if usage is None:
            usage = {}
        if not isinstance(usage, Mapping):
            raise ValueError(f"'usage' is {json_type(usage)}, not an object")
        tokens: list[int] = []
        for name in ("prompt_tokens", "completion_tokens"):
            count = usage.get(name, 0)
            # bool is an int in Python, and a negative count is no count.
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise ValueError(f"'usage.{name}' is {count!r}, not a token count")
            if count > MAX_TOKEN_COUNT:
                raise ValueError(f"'usage.{name}' is a whole number of {len(str(count))} digits, past 2**53")
            tokens.append(count)
        text: dict[str, str] = {}
        for name in ("model", "judged_at"):
            value = "" if data.get(name) is None else data[name]  # null says unknown, as a missing field
            if not isinstance(value, str):
                raise ValueError(f"{name!r} is {json_type(value)}, not a string")
            text[name] = value
        return cls(
            choices=tuple(choices),
            usage=Usage(tokens[0], tokens[1]),
            model=text["model"],
            judged_at=text["judged_at"],
            source=source,
            derived=derived,
        )


_new_answer = quick_init(JudgeAnswer)  # JudgeAnswer(...) without the class call, as _new_usage


def recorded_answer(
    data: Any, schema: Mapping[str, Any], n: int, source: Source, derived: Mapping[str, Any] | None = None
) -> JudgeAnswer | None:
    """The answer ``data`` records (written by :meth:`JudgeAnswer.to_json`, read from a file) when it
    has the shape every recorded answer has and its ``n`` choices conform to ``schema``; else None,
    and the caller finds out what is wrong with :meth:`JudgeAnswer.from_json` and :func:`conforms`.

    One pass over the entry with the schema's compiled check: a warm run reads thousands.
    """
    if type(data) is not dict:
        return None
    choices, usage = data.get("choices"), data.get("usage", _NO_USAGE)
    model, judged_at = data.get("model", ""), data.get("judged_at", "")
    if (
        type(choices) is not list
        or len(choices) != n
        or type(usage) is not dict
        or type(model) is not str
        or type(judged_at) is not str
    ):
        return None
    hit = _CHECKERS.get(id(schema))  # _checker(schema), without a call when compiled already
    check = hit[1] if hit is not None and hit[0] is schema else _checker(schema)
    for choice in choices:
        if not check(choice):
            return None
    prompt, completion = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
    if (
        type(prompt) is not int
        or type(completion) is not int
        or not 0 <= prompt <= MAX_TOKEN_COUNT
        or not 0 <= completion <= MAX_TOKEN_COUNT
    ):
        return None
    return _new_answer(tuple(choices), _new_usage(prompt, completion), model, judged_at, source, derived)


_NO_USAGE: Mapping[str, int] = {}

#: The largest token count an answer records: a server's larger count is bounded to it when the
#: answer arrives, so only a hand edit records more, which would make the run's report one that
#: ``report merge`` and a baseline comparison refuse.
MAX_TOKEN_COUNT = 2**53


@runtime_checkable
class Judge(Protocol):
    """What the engine needs from a judge. Implementations must validate answers against the schema."""

    async def judge(self, request: JudgeRequest) -> JudgeAnswer:
        """Return a validated answer for ``request``, or raise a ``JudgeError``."""
        ...


#: Set by whoever awaits a judge and wants to know when a request is at the server: until it is,
#: dropping the request costs nothing. A judge that may wait inside :meth:`Judge.judge` before
#: sending (for a free slot, for the first request to find the server's response format, to retry)
#: calls :func:`mark_sent` right before it sends, and ``mark_sent(False)`` when no answer is coming
#: (it failed and waits to retry), and says so with a true ``reports_sending`` attribute.
sending: contextvars.ContextVar[Callable[[bool], None] | None] = contextvars.ContextVar(
    "sending", default=None
)


def mark_sent(sent: bool = True) -> None:
    """Tell whoever awaits this judgment (see :data:`sending`) that its request is leaving now
    (``sent``), or that no answer is on its way any more (not ``sent``: it waits to retry)."""
    callback = sending.get()
    if callback is not None:
        callback(sent)


def utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# --- schema validation -------------------------------------------------------------------------
# The schemas we send use a small subset of JSON Schema (what strict structured outputs accept):
# object with properties/required/additionalProperties, array with items, string, integer, number,
# boolean, enum. Servers that ignore strict mode still get checked against exactly that subset.


def schema_errors(schema: Mapping[str, Any], value: Any, path: str = "$") -> list[str]:
    """Return human-readable reasons why ``value`` does not conform to ``schema`` (empty if it does)."""
    errors: list[str] = []
    expected = schema.get("type")
    if "enum" in schema and value not in schema["enum"]:
        # bool is an int in Python; True must not pass for an enum of [0, 1, 2].
        errors.append(f"{path}: {value!r} is not one of {list(schema['enum'])}")
        return errors
    if isinstance(value, bool) and "enum" in schema and expected != "boolean":
        errors.append(f"{path}: {value!r} is not one of {list(schema['enum'])}")
        return errors
    if expected == "object":
        if not isinstance(value, dict):
            return [f"{path}: expected an object, got {type(value).__name__}"]
        props: Mapping[str, Any] = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                errors.append(f"{path}: missing required property {name!r}")
        if schema.get("additionalProperties") is False:
            extra = sorted(set(value) - set(props))
            if extra:
                errors.append(f"{path}: unexpected properties {extra}")
        for name, sub in props.items():
            if name in value:
                errors.extend(schema_errors(sub, value[name], f"{path}.{name}"))
    elif expected == "array":
        if not isinstance(value, list):
            return [f"{path}: expected an array, got {type(value).__name__}"]
        items = schema.get("items")
        if items is not None:
            for i, item in enumerate(value):
                errors.extend(schema_errors(items, item, f"{path}[{i}]"))
    elif expected == "string":
        if not isinstance(value, str):
            errors.append(f"{path}: expected a string, got {type(value).__name__}")
    elif expected == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append(f"{path}: expected an integer, got {value!r}")
    elif expected == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
            errors.append(f"{path}: expected a number, got {value!r}")
    elif expected == "boolean" and not isinstance(value, bool):
        errors.append(f"{path}: expected true or false, got {value!r}")
    return errors


def conforms(schema: Mapping[str, Any], value: Any) -> bool:
    """``not schema_errors(schema, value)``, from a checker compiled once per schema object.

    A warm run checks every cached answer it serves; :func:`schema_errors` builds messages nobody
    reads when the answer is fine.
    """
    return _checker(schema)(value)


def answer_errors(schema: Mapping[str, Any], value: Any) -> list[str]:
    """:func:`schema_errors` of a judge's answer, after the compiled check (:func:`conforms`): the
    reasons are worked out only for an answer that has some."""
    return [] if conforms(schema, value) else schema_errors(schema, value)


def _checker(schema: Mapping[str, Any]) -> Callable[[Any], bool]:
    """The check of ``schema`` compiled by :func:`_compile`, once per schema object."""
    hit = _CHECKERS.get(id(schema))
    if hit is None or hit[0] is not schema:
        if len(_CHECKERS) >= 256:
            _CHECKERS.clear()
        hit = _CHECKERS[id(schema)] = (schema, _compile(schema))
    return hit[1]


# By schema object id; an entry keeps its schema alive, so the id is not reused while it is here.
_CHECKERS: dict[int, tuple[Mapping[str, Any], Callable[[Any], bool]]] = {}

#: The test of a value of each JSON type a schema names (bool is an int in Python, so excluded).
_TYPE_TESTS = {
    "string": "isinstance({v}, str)",
    "integer": "(type({v}) is int or (isinstance({v}, int) and not isinstance({v}, bool)))",
    "number": "(isinstance({v}, (int, float)) and not isinstance({v}, bool) and {v} == {v})",
    "boolean": "isinstance({v}, bool)",
}


def _compile(schema: Mapping[str, Any]) -> Callable[[Any], bool]:
    """A function telling whether a value conforms to ``schema`` (the subset :func:`schema_errors`
    reads): the schema written out as the statements of one function, as :mod:`dataclasses` writes
    an ``__init__``, so checking an answer is one call however deeply its schema nests."""
    writer = _CheckWriter()
    writer.emit(schema, "v", 1)
    source = "def check(v):\n" + "".join(line + "\n" for line in writer.lines) + "    return True\n"
    exec(source, writer.names)  # the schema's property names as literals (repr), its values as names
    check: Callable[[Any], bool] = writer.names["check"]
    return check


def _in_enum(enum: Any, value: Any, boolean: bool) -> bool:
    """Whether ``value`` is one of ``enum``, for an enum of no type the schema names."""
    try:
        found = value in enum
    except TypeError:  # an unhashable value (a list, an object) is in no set of scalars
        return False
    # bool is an int in Python; True must not pass for an enum of [0, 1, 2].
    return bool(found) and (boolean or not isinstance(value, bool))


class _CheckWriter:
    """Writes the statements of a compiled check (see :func:`_compile`)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        #: The compiled function's globals: the enums and key sets it compares with.
        self.names: dict[str, Any] = {"_in_enum": _in_enum}
        self._count = 0

    def _name(self, prefix: str, value: Any = None) -> str:
        self._count += 1
        name = f"{prefix}{self._count}"
        if value is not None:
            self.names[name] = value
        return name

    def emit(self, schema: Mapping[str, Any], v: str, depth: int) -> None:
        """Statements that return False unless the value in variable ``v`` conforms to ``schema``."""
        pad, lines = "    " * depth, self.lines
        expected = schema.get("type")
        test = _TYPE_TESTS.get(expected) if isinstance(expected, str) else None
        if "enum" in schema:
            enum: Any = list(schema["enum"])
            with contextlib.suppress(TypeError):  # unhashable values: look them up in the list
                enum = frozenset(enum)
            values = self._name("_enum", enum)
            if test is not None:  # a value of a JSON scalar type is hashable: its type, then the set
                lines.append(f"{pad}if not ({test.format(v=v)} and {v} in {values}): return False")
                return
            lines.append(f"{pad}if not _in_enum({values}, {v}, {expected == 'boolean'}): return False")
        elif test is not None:
            lines.append(f"{pad}if not {test.format(v=v)}: return False")
            return
        if expected == "object":
            props: Mapping[str, Any] = schema.get("properties", {})
            required = frozenset(schema.get("required", []))
            closed = schema.get("additionalProperties") is False
            lines.append(f"{pad}if not isinstance({v}, dict): return False")
            if closed and required == frozenset(props):  # every property, and no other
                lines.append(f"{pad}if {v}.keys() != {self._name('_keys', required)}: return False")
            else:
                if required:
                    lines.append(f"{pad}if not {v}.keys() >= {self._name('_keys', required)}: return False")
                if closed:
                    allowed = self._name("_keys", frozenset(props))
                    lines.append(f"{pad}if not {v}.keys() <= {allowed}: return False")
            for name, sub in props.items():
                item, at = self._name("x"), len(lines)
                self.emit(sub, item, depth if name in required else depth + 1)
                if len(lines) == at:
                    continue  # nothing to check of it
                if name in required:
                    lines.insert(at, f"{pad}{item} = {v}[{name!r}]")
                else:
                    lines[at:at] = [f"{pad}if {name!r} in {v}:", f"{pad}    {item} = {v}[{name!r}]"]
        elif expected == "array":
            lines.append(f"{pad}if not isinstance({v}, list): return False")
            items = schema.get("items")
            if items is not None:
                item, at = self._name("x"), len(lines)
                self.emit(items, item, depth + 1)
                if len(lines) > at:
                    lines.insert(at, f"{pad}for {item} in {v}:")


def validate_answer(request: JudgeRequest, value: Any) -> Mapping[str, Any]:
    """Return ``value`` if it conforms to ``request.schema``, else raise :class:`InvalidJudgeAnswer`."""
    errors = answer_errors(request.schema, value)
    if errors:
        shown = "; ".join(errors[:5]) + (f"; and {len(errors) - 5} more" if len(errors) > 5 else "")
        raise InvalidJudgeAnswer(f"judge answer for {request.label or request.kind} is invalid: {shown}")
    assert isinstance(value, dict)
    return value


# --- a judge that answers from a script ---------------------------------------------------------

Script = Callable[[JudgeRequest], "Mapping[str, Any] | Sequence[Mapping[str, Any]]"]


class ScriptedJudge:
    """A judge whose answers come from a Python function: for unit tests and for hand labelling.

    ``script(request)`` returns one answer (used for every choice) or a list of ``request.n`` answers.
    Answers are validated against the request's schema exactly like a real judge's.
    """

    def __init__(self, script: Script, model: str = "scripted") -> None:
        self.script = script
        self.model = model
        self.requests: list[JudgeRequest] = []

    @property
    def calls(self) -> int:
        return len(self.requests)

    async def judge(self, request: JudgeRequest) -> JudgeAnswer:
        self.requests.append(request)
        raw = self.script(request)
        answers = [raw] * request.n if isinstance(raw, Mapping) else raw
        if (
            isinstance(answers, (str, bytes))
            or not isinstance(answers, Sequence)
            or not all(isinstance(a, Mapping) for a in answers)
        ):
            # A script's slip (no return, a verdict alone): an invalid answer, never a traceback.
            raise InvalidJudgeAnswer(
                f"scripted judge gave {type(raw).__name__} {raw!r:.60} for {request.label}; expected an "
                f"answer (a dict) or a list of {request.n} answers"
            )
        if len(answers) != request.n:
            raise InvalidJudgeAnswer(
                f"scripted judge gave {len(answers)} answers for {request.label}; expected {request.n}"
            )
        choices = tuple(validate_answer(request, dict(a)) for a in answers)
        return JudgeAnswer(choices=choices, model=self.model, judged_at=utc_now())
