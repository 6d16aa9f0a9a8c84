"""How every patch changes fairseq: ``replace(owner, name, make)`` sets ``owner.name`` to
``make(original)`` once; a second call with the same ``make`` (the package imported twice, ``register()``
called again) changes nothing. Two patches may wrap the same function, each once."""

MARK = "__transformer_plugin_patch__"  # on a replacement: the patches (their `make`) it holds, innermost first


def replace(owner, name: str, make) -> bool:
    """Replace ``owner.name`` by ``make(original)`` unless ``make`` did already; True when done now."""
    original = getattr(owner, name)
    key = f"{make.__module__}.{make.__qualname__}"
    held = getattr(original, MARK, ())
    if key in held:
        return False
    new = make(original)
    if new.__doc__ is None:
        new.__doc__ = original.__doc__
    setattr(new, MARK, (*held, key))
    setattr(owner, name, new)
    return True
