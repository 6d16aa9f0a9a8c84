"""transformer_plugin_cli/languages.py: OPUS-MT's language codes against SRC and TGT (ISO 639-1 and 639-3 as one,
groups, the >>xx<< tokens of multilingual parents)."""

import pytest

from transformer_plugin_cli import languages


@pytest.mark.parametrize(
    "a,b,same",
    [
        ("en", "eng", True),
        ("deu", "de", True),
        ("ger", "de", True),  # ISO 639-2/B
        ("pt_BR", "por", True),  # a region after the language
        ("cmn_Hans", "cmn", True),  # a script after it
        ("de", "nl", False),
        ("zh", "cmn", False),  # a macrolanguage and one of its languages: TGT_TOKEN says which
        ("xx", "xx", True),  # an unknown code is itself
        ("xx", "yy", False),
    ],
)
def test_codes_name_one_language_in_639_1_and_639_3(a, b, same):
    assert languages.same_language(a, b) is same and languages.same_language(b, a) is same


@pytest.mark.parametrize(
    "code,group",
    [("mul", True), ("gem", True), ("ROMANCE", True), ("deu+nld", True), ("de", False), ("deu", False), ("zho", False)],
)
def test_a_group_of_languages_is_told_from_one(code, group):
    assert languages.is_group(code) is group


def test_the_tokens_that_name_a_target_are_found_in_any_of_its_codes():
    pieces = ["</s>", ">>deu<<", ">>fra<<", ">>nld<<", ">>de<<", "▁the", ">>cmn_Hans<<"]
    assert languages.target_tokens("de", pieces) == [">>deu<<", ">>de<<"]
    assert languages.target_tokens("fr", pieces) == [">>fra<<"]
    assert languages.target_tokens("cmn", pieces) == [">>cmn_Hans<<"]
    assert languages.target_tokens("it", pieces) == []


def test_a_macrolanguages_code_finds_its_standard_language_and_names_the_others_members():
    from transformer_plugin_cli.languages import in_macrolanguage

    # NLLB's codes are individual languages: swh_Latn for sw, arb_Arab for ar, zsm_Latn for ms, lvs_Latn for lv
    for code, macro in (("swh", "sw"), ("arb", "ar"), ("zsm", "ms"), ("lvs", "lv"), ("ekk", "et")):
        assert in_macrolanguage(code, macro) == "standard"
    for code, macro in (("arz", "ar"), ("pes", "fa"), ("uzn", "uz"), ("cmn", "zh"), ("yue", "zh")):
        assert in_macrolanguage(code, macro) == "member"
    # not a macrolanguage, another language, the macrolanguage itself
    for code, macro in (("deu", "de"), ("prs", "fa"), ("zho", "zh"), ("arb", "de")):
        assert in_macrolanguage(code, macro) is None
