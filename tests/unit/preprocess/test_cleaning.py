"""preprocess/cleaning.py: the one cleaner, a rule set for each kind of text, named by each preparation. The rules'
effects on whole corpora are tested through the preparations (test_wmt14.py, test_parallel_text.py,
test_debian_l10n.py)."""

import pytest

from preprocess import cleaning, debian_l10n, parallel_text, wmt14


def test_each_preparation_names_its_rule_set():
    assert (wmt14.RULES, parallel_text.RULES, debian_l10n.RULES) == (cleaning.Moses, cleaning.Opus, cleaning.Gettext)


@pytest.mark.parametrize(
    "rules, source, target, kept, said",
    [
        (cleaning.Moses("en", "de"), "„Hi“  there", "Hallo  da", ('"Hi" there', "Hallo da"), []),
        (cleaning.Moses("en", "de", max_ratio=1.5), "one two three four", "eins zwei", None, ["ratio"]),
        (cleaning.Moses("en", "de", max_words=3), "one two three four", "eins zwei drei vier", None, ["too_long"]),
        (
            cleaning.Opus("en", "de"),
            "\ufeffThe house\r",
            "Das  Haus",
            ("The house", "Das Haus"),
            [
                "byte-order mark removed",
                "carriage return at the end removed",
                "white space collapsed (runs, tabs, or at either end)",
            ],
        ),
        (cleaning.Opus("en", "de"), "The house", "The house", None, ["source equal to target"]),
        (
            cleaning.Opus("en", "de", scripts=("LATIN", "LATIN")),
            "The house",
            "家です",
            None,
            ["a side mostly not in its script (de: latin)"],
        ),
        (
            cleaning.Gettext("en", "de"),
            "_Open the file",
            "Datei _öffnen jetzt",
            ("Open the file", "Datei öffnen jetzt"),
            [],
        ),
        (cleaning.Gettext("en", "de"), "Open the file", "Open the file", None, ["untranslated"]),
        (cleaning.Gettext("en", "de"), "Open", "Öffnen", None, ["too short"]),
    ],
)
def test_a_pair_is_normalised_then_kept_or_dropped_saying_why(rules, source, target, kept, said):
    notes = []
    assert rules.clean(source, target, note=notes.append) == kept
    assert notes == said
