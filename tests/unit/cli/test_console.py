"""transformer_plugin_cli/console.py: a command whose output is closed early ends quietly, as Unix tools do."""

import contextlib
import io
import os
import subprocess
import sys

import pytest

from transformer_plugin_cli.console import CLOSED_OUTPUT_STATUS, console_script


@contextlib.contextmanager
def closed_stdout():
    """sys.stdout as a pipe whose reading end is already closed (``| head -1`` once head has exited); set in
    the test itself, as pytest sets its own capture at the start of each phase."""
    read, write = os.pipe()
    os.close(read)
    saved, sys.stdout = sys.stdout, io.TextIOWrapper(io.FileIO(write, "w"))
    try:
        yield sys.stdout
    finally:
        stream, sys.stdout = sys.stdout, saved
        stream.close()


def test_output_closed_early_ends_quietly_with_status_141():
    @console_script
    def main():
        for i in range(100_000):
            print(f"line {i}")
        return 0

    with closed_stdout():
        assert main() == CLOSED_OUTPUT_STATUS == 141
        print("more")  # the rest goes nowhere, without an error
        sys.stdout.flush()


def test_a_broken_pipe_to_another_program_is_an_error():
    """Only standard output's closing is quiet: a child that stops reading is the tool's fault to report."""

    @console_script
    def main():
        child = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.PIPE)
        child.wait()
        child.stdin.write(b"x" * 1_000_000)
        child.stdin.flush()

    with pytest.raises(BrokenPipeError):
        main()


def test_what_main_returns_is_kept():
    assert console_script(lambda: 3)() == 3 and console_script(lambda: None)() is None


def test_long_options_are_kebab_case_and_their_snake_case_spellings_still_parse(capsys):
    """The exports' options, CTranslate2's own among them (declared ``--output_dir``), are shown kebab-case alone and
    parse in either spelling, as users' scripts type them."""
    import argparse

    from transformer_plugin_cli.console import kebab_case_options

    parser = argparse.ArgumentParser(prog="export")
    parser.add_argument("--model-path", required=True)
    parser.add_argument("--output_dir", required=True)  # as ctranslate2's Converter.declare_arguments does
    parser.add_argument("--force", action="store_true")
    kebab_case_options(parser)
    for argv in (["--model-path", "m", "--output-dir", "o"], ["--model_path", "m", "--output_dir", "o"]):
        args = parser.parse_args(argv)
        assert (args.model_path, args.output_dir, args.force) == ("m", "o", False)
    parser.print_help()
    shown = capsys.readouterr().out
    assert "--model-path" in shown and "--output-dir" in shown and "_path" not in shown and "--output_dir" not in shown
