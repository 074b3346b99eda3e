"""Deterministic rule-based sentence splitting for datasets that ship paragraphs, not sentences.

MuSiQue gives each paragraph as one string; grasp indexes sentences, so the string has to be
cut. The rules are deliberately simple and fixed (no model, no locale data) so that the same
text always yields the same sentences and sentence ids stay stable across machines:

- a boundary may follow ``.``, ``!`` or ``?`` (and any closing quotes or brackets right after
  them) when whitespace and then an upper-case letter, a digit or an opening quote follow;
- a ``.`` is not a boundary after a known abbreviation (``Dr.``, ``U.S.``, ``Jan.``, ``et al.``,
  ``e.g.``, ...), a single-letter initial (``J. R. R. Tolkien``) or a dotted initialism
  (``U.S.A.``).

Invariant: ``" ".join(split_sentences(t))`` equals ``t`` up to whitespace normalization; every
returned sentence is non-empty and has no surrounding whitespace.

Example::

    >>> split_sentences("Dr. Smith met J. R. R. Tolkien. They talked.")
    ['Dr. Smith met J. R. R. Tolkien.', 'They talked.']
"""

from __future__ import annotations

import re

__all__ = ["ABBREVIATIONS", "split_sentences"]

# Words that end in a period without ending the sentence, compared case-insensitively
# ("No. 5", "Vs.", "op. 33"). The trailing period is left out; "et al" spans two words.
ABBREVIATIONS: frozenset[str] = frozenset(
    {
        # titles and honorifics
        "mr", "mrs", "ms", "dr", "prof", "rev", "hon", "gen", "col", "lt", "capt", "cmdr",
        "sgt", "maj", "adm", "gov", "sen", "rep", "pres", "fr", "sr", "jr", "mt", "ft", "st",
        "messrs", "mme", "mlle",
        # months ("May" is never abbreviated)
        "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
        # organisations and addresses
        "inc", "ltd", "co", "corp", "bros", "ave", "blvd", "rd", "dept", "univ", "assn",
        "u.s", "u.k", "u.n", "d.c",
        # references, catalogue numbers and Latin
        "no", "nos", "vol", "pp", "ed", "eds", "fig", "ch", "art", "op", "est",
        "vs", "etc", "e.g", "i.e", "ca", "approx", "et al",
    }
)  # fmt: skip

_TERMINATORS = ".!?"
# Closing quotes and brackets that may trail a terminator and still belong to the sentence.
# "''" is the closing quote of PTB-tokenized text such as MuSiQue's.
_CLOSERS = "\"'”’)]}»"
# A new sentence starts with an upper-case letter or a digit, optionally behind one opening
# quote or bracket ("``" is PTB's opening quote, as in MuSiQue). A quote before a lower-case
# word ('"the book of ..."') does not start a sentence.
_NEXT_SENTENCE = re.compile(r"(?:``|[\"'“‘«(\[])?(?=[^\W_])")
# Characters stripped around the word before a period so that abbreviations and initials are
# still found inside quotes and brackets ('"T".', "(est.)"). Closing brackets are kept: the
# period after "(1 m)." ends a sentence although "m" alone would look like an initial.
_WORD_LEADERS = "\"'“‘«`([{"
_WORD_TRAILERS = "\"'”’»"

# A run of terminators, its trailing closers, then whitespace: every candidate boundary.
_CANDIDATE = re.compile(rf"[{re.escape(_TERMINATORS)}]+[{re.escape(_CLOSERS)}]*(\s+)")
_DOTTED_INITIALISM = re.compile(r"(?:[^\W\d_]\.)+[^\W\d_]")


def _starts_sentence(text: str, index: int) -> bool:
    """Whether a new sentence may start at ``text[index]``."""
    opener = _NEXT_SENTENCE.match(text, index)
    if opener is None:
        return False
    first = text[opener.end()]
    return first.isupper() or first.isdigit()


def _word_before(text: str, end: int) -> tuple[str, str]:
    """The word ending at ``end`` (leading brackets/quotes dropped) and the word before it."""
    if end == 0 or text[end - 1].isspace():
        return "", ""
    words = text[:end].split()
    if not words:
        return "", ""
    word = words[-1].lstrip(_WORD_LEADERS).rstrip(_WORD_TRAILERS)
    previous = words[-2].lstrip(_WORD_LEADERS) if len(words) > 1 else ""
    return word, previous


def _is_abbreviation_period(text: str, period: int) -> bool:
    """Whether the ``.`` at position ``period`` closes an abbreviation rather than a sentence."""
    word, previous = _word_before(text, period)
    if not word:
        return False
    if word.lower() in ABBREVIATIONS or f"{previous} {word}".lower() in ABBREVIATIONS:
        return True
    # A single letter is an initial ("J. R. R. Tolkien"); "U.S.A" is a dotted initialism.
    if len(word) == 1 and word.isalpha():
        return True
    return _DOTTED_INITIALISM.fullmatch(word) is not None


def _is_boundary(text: str, match: re.Match[str]) -> bool:
    """Whether the candidate ``match`` (terminators, closers, whitespace) ends a sentence."""
    next_index = match.end()
    if next_index >= len(text) or not _starts_sentence(text, next_index):
        return False
    run = match.group(0)
    terminators = run[: len(run) - len(run.lstrip(_TERMINATORS))]
    # Only a lone "." can belong to an abbreviation; "?", "!" and "..." always end a sentence.
    if terminators == ".":
        return not _is_abbreviation_period(text, match.start())
    return True


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences with the fixed rules of this module.

    Args:
        text: any string; whitespace inside a sentence is kept as it is.

    Returns:
        The sentences in order, each stripped and non-empty; ``[]`` for blank text.
    """
    sentences: list[str] = []
    start = 0
    for match in _CANDIDATE.finditer(text):
        if _is_boundary(text, match):
            sentence = text[start : match.start(1)].strip()
            if sentence:
                sentences.append(sentence)
            start = match.end(1)
    last = text[start:].strip()
    if last:
        sentences.append(last)
    return sentences
