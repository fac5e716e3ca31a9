"""MLIR's --verify-diagnostics rules, on text: annotations parsed, then compared."""

from __future__ import annotations

import pytest

from forge.tools.verify_diagnostics import (
    ELSEWHERE,
    Diagnostic,
    literal_and_regex,
    parse_annotations,
    verify,
)

FILE = "t.mlir"


def error(line: int | None, message: str, severity: str = "error") -> Diagnostic:
    location = None if line is None else f"{FILE}:{line}:3"
    return Diagnostic(line, severity, message, location)


def check(text: str, *emitted: Diagnostic, first_line: int = 1) -> list[str]:
    return verify(parse_annotations(text, FILE, first_line), list(emitted), FILE)


def test_plain_annotation_means_its_own_line() -> None:
    text = "a\n%0 = npu.neg %x  // expected-error {{device must be}}\n"
    annotations = parse_annotations(text, FILE)
    assert [(e.line, e.severity, e.text) for e in annotations.expected] == [
        (2, "error", "device must be")
    ]
    assert annotations.expected[0].where == f"{FILE}:2:21"
    assert check(text, error(2, "'npu.neg' op device must be one of npu, cpu")) == []


@pytest.mark.parametrize(
    ("annotation", "line"),
    [("@+1", 3), ("@+2", 4), ("@-1", 1), ("@above", 1), ("@below", 3)],
)
def test_designators(annotation: str, line: int) -> None:
    text = f"one\n// expected-error{annotation} {{{{boom}}}}\nthree\nfour\n"
    (expected,) = parse_annotations(text, FILE).expected
    assert expected.line == line


def test_above_and_below_skip_annotation_lines() -> None:
    """`@above`/`@below` refer to the nearest line that is not itself an annotation."""
    text = "\n".join(
        [
            "target_above",
            "// expected-note {{x}}",
            "// expected-error@above {{a}}",
            "// expected-error@below {{b}}",
            "// expected-warning@below {{c}}",
            "target_below",
        ]
    )
    lines = {e.text: e.line for e in parse_annotations(text, FILE).expected}
    assert lines == {"x": 2, "a": 1, "b": 6, "c": 6}


def test_dangling_below_is_never_matched() -> None:
    text = "x\n// expected-error@below {{late}}"
    problems = check(text, error(2, "late"))
    assert problems[0].startswith(f"{FILE}:2:3: error: unexpected error: late")
    assert problems[1] == f'{FILE}:2:4: error: expected error "late" was not produced'


def test_line_numbers_continue_across_split_chunks() -> None:
    chunk = "\n// expected-error@+1 {{bad}}\n%0 = op\n"
    (expected,) = parse_annotations(chunk, FILE, first_line=40).expected
    assert (expected.line, expected.where) == (42, f"{FILE}:41:4")
    assert check(chunk, error(42, "bad"), first_line=40) == []
    assert check(chunk, error(3, "bad"), first_line=40) != []


def test_message_is_a_substring_not_a_pattern() -> None:
    text = "// expected-error@+1 {{shape 2x3 [0]}}\nop"
    assert check(text, error(2, "'npu.add' op shape 2x3 [0] is wrong")) == []
    assert check(text, error(2, "'npu.add' op shape 2x3 0 is wrong")) != []


def test_message_runs_to_the_last_closing_braces() -> None:
    (expected,) = parse_annotations("x // expected-error {{a {{b}} c}}", FILE).expected
    assert expected.text == "a {{b}} c"


def test_regex_blocks_in_re_annotations() -> None:
    text = "// expected-error-re@+1 {{shapes {{[0-9x]+}}, 4 do not broadcast (x.y)}}\nop"
    assert check(text, error(2, "op shapes 2x3, 4 do not broadcast (x.y)")) == []
    # outside `{{...}}` the text is literal: `.` and `(` match only themselves
    assert check(text, error(2, "op shapes 2x3, 4 do not broadcast (xzy)")) != []
    assert check(text, error(2, "op shapes ab, 4 do not broadcast (x.y)")) != []
    assert literal_and_regex("a.{{b+}}c") == r"a\.(b+)c"


def test_bad_regex_is_reported_at_the_annotation() -> None:
    annotations = parse_annotations("x\n  // expected-error-re {{a {{[}} b}}", FILE)
    assert annotations.expected == []
    (problem,) = annotations.errors
    assert problem.startswith(f"{FILE}:2:6: error: invalid regex:")
    unterminated = parse_annotations("// expected-error-re {{a {{b c}}", FILE)
    assert unterminated.errors == [f"{FILE}:1:4: error: found start of regex with no end '}}}}'"]


def test_unexpected_and_missing_are_both_reported() -> None:
    text = "// expected-error@+1 {{wanted}}\nop\nother"
    problems = check(text, error(3, "got this"))
    assert problems == [
        f"{FILE}:3:3: error: unexpected error: got this",
        f'{FILE}:1:4: error: expected error "wanted" was not produced',
    ]


def test_a_diagnostic_on_another_line_does_not_match() -> None:
    text = "// expected-error@+1 {{wanted}}\nop\nop"
    assert len(check(text, error(3, "wanted"))) == 2


def test_severity_must_agree() -> None:
    text = "op // expected-warning {{careful}}"
    problems = check(text, error(1, "be careful"))
    assert (
        problems[0] == f"{FILE}:1:7: error: 'error' diagnostic emitted when expecting a 'warning'"
    )
    assert check(text, error(1, "be careful", "warning")) == []


def test_each_annotation_expects_one_and_absorbs_repeats() -> None:
    twice = "op\n// expected-error@above {{dup}}\n// expected-error@above {{dup}}"
    assert check(twice, error(1, "dup"), error(1, "dup")) == []
    (missing,) = check(twice, error(1, "dup"))
    assert missing == f'{FILE}:3:4: error: expected error "dup" was not produced'
    once = "op // expected-error {{dup}}"
    assert check(once, error(1, "dup"), error(1, "dup")) == []


def test_unknown_location() -> None:
    text = "// expected-error@unknown {{pass failed}}"
    assert check(text, error(None, "pass failed: boom")) == []
    assert check(text, error(1, "pass failed: boom")) != []
    (problem,) = check("", error(None, "no location"))
    assert problem == f"{FILE}: error: unexpected error: no location"


def test_diagnostic_locations() -> None:
    assert Diagnostic.at(f"{FILE}:7:3", "error", "m", FILE).line == 7
    assert Diagnostic.at(None, "error", "m", FILE).line is None
    assert Diagnostic.at(FILE, "error", "m", FILE).line is None
    assert Diagnostic.at("model.py:7:3", "error", "m", FILE).line == ELSEWHERE
    # a diagnostic in another file is unexpected whatever the annotations say
    text = "// expected-error@unknown {{m}}\n" * 8
    assert check(text, Diagnostic.at("model.py:1:1", "error", "m", FILE))[0] == (
        "model.py:1:1: error: unexpected error: m"
    )


def test_no_annotations_and_no_diagnostics_is_a_pass() -> None:
    assert check("func.func @f() {\n  func.return\n}\n") == []


def test_text_that_only_mentions_the_syntax_is_not_an_annotation() -> None:
    """Without `{{...}}` closing the line there is nothing to expect."""
    text = "// expected-error without braces\n// expected-error {{open"
    assert parse_annotations(text, FILE).expected == []
