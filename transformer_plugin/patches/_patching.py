"""How every patch changes fairseq: ``replace(owner, name, make)`` sets ``owner.name`` to
``make(original)`` once; a second call (the package imported twice, ``register()`` called again)
changes nothing."""

MARK = "__transformer_plugin_patch__"


def replace(owner, name: str, make) -> bool:
    """Replace ``owner.name`` by ``make(original)`` unless done already; True when done now."""
    original = getattr(owner, name)
    if getattr(original, MARK, False):
        return False
    new = make(original)
    if new.__doc__ is None:
        new.__doc__ = original.__doc__
    setattr(new, MARK, True)
    setattr(owner, name, new)
    return True
