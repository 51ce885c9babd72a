"""Chain-of-thought answers to four-option questions, in the styles models write, each with
the options a careful reader takes as chosen (issue #29 point 4).

Each style is written by hand with placeholders {a}…{d} for the option letters and the
reading expected; `answers()` fills them with several assignments of A–D, so the same style is
checked with the chosen letter before, after and between the letters only mentioned."""

from itertools import islice, permutations

STYLES: list[tuple[str, str]] = [
    # No answer marker: the conclusion, not every letter mentioned.
    ("Paris is the capital of France, so {a}. London is {b}, which is wrong.", "a"),
    ("Paris is the capital, so {a}. London is {b}, Berlin is {c}.", "a"),
    ("It can't be {a} or {b}, so it must be {c}.", "c"),
    ("{a} ignores friction and {b} double-counts it. Therefore {c}.", "c"),
    ("Step 1: the mass is conserved.\nStep 2: only {d} keeps it constant.\nHence, {d}.", "d"),
    ("Option {a} is incorrect because the sign is wrong. Option {b} is incorrect as well. "
     "Option {c} is correct. Option {d} misreads the graph.", "c"),
    ("{a}: incorrect, the unit is off.\n{b}: incorrect.\n{c}: correct.\n{d}: incorrect.", "c"),
    ("{a}) wrong\n{b}) wrong\n{c}) right\n{d}) wrong", "c"),
    ("Looking at {a}, it overstates the effect; {b} is closer, and {c} is off by a factor of "
     "two. {b} is the best choice.", "b"),
    ("Among the options, {c} fits best; {a} and {d} contradict the passage.", "c"),
    ("{b} is correct. {a} is wrong because it ignores tax, and {c} is wrong because it "
     "doubles it.", "b"),
    ("Comparing {a} and {d}: {a} is outdated. So the answer must be {d}.", "d"),
    ("First I considered {a}, then {b}. Thus {b}.", "b"),
    # Answer markers: the last one that states an answer wins.
    ("Let's think step by step. The reaction is exothermic, which rules out {a} and {d}. "
     "Between {b} and {c}, only {c} releases gas. Therefore, the answer is ({c}).", "c"),
    ("{a} looks tempting, but it confuses speed with velocity.\n\nThe answer is {b}.", "b"),
    ("Initially I thought {a}, but on reflection the answer is {d}.", "d"),
    ("The answer is not {a}. The answer is {c}.", "c"),
    ("Reasoning: {a} and {b} both fail the boundary case.\nFinal answer: {c}", "c"),
    ("**Reasoning:** {d} mixes up the units.\n**Answer:** {a}", "a"),
    ("The correct option is **{d}** since {a}, {b} and {c} each break a premise.", "d"),
    ("I believe the answer should be {d}, because {b} assumes a closed system.", "d"),
    ("Answer: ({c}) 42 — the other values come from rounding too early, as in {a}.", "c"),
    ("After eliminating {a} and {d}, {b} and {c} remain; of these, {b} is better. "
     "Answer: {b}", "b"),
    ("So the final answer is {a}.", "a"),
    ("The best answer is {c}: {a} is too narrow and {b} too broad.", "c"),
    # Bold and boxed answers.
    ("{a} mixes up cause and effect. {b} is only partly true.\n\n**{c}**", "c"),
    ("### Final Answer\n**{b}**\n\n{a} and {c} misread the question.", "b"),
    ("Working it out: 3 × 4 = 12, which matches {d} and not {a}.\n\n$\\boxed{{{d}}}$", "d"),
    ("The answer is \\(\\boxed{{{b}}}\\). Option {a} forgets the constant.", "b"),
    ("{a} is a distractor. The correct choice: **({c})**", "c"),
    ("Eliminating {a}, {b} and {d} leaves $\\boxed{{\\text{{{c}}}}}$.", "c"),
    # Chinese and Japanese.
    ("{a}项混淆了概念，{b}项数据有误，因此答案是{c}。", "c"),
    ("选项{a}错误，选项{b}错误，选项 {c} 正确。", "c"),
    ("分析：{a}不符合题意。所以选{d}。", "d"),
    ("{a}和{b}都不对，答案：{c}", "c"),
    ("{a}は誤りです。答えは{b}です。", "b"),
    # Several options chosen on purpose.
    ("The answer is {a} and {c}.", "ac"),
    ("Both {a} and {c} are correct; {b} and {d} are not.", "ac"),
    ("The correct answers are {b} and {d}, since {a} and {c} ignore the constraint.", "bd"),
    ("{a}和{c}正确，{b}错误。", "ac"),
    ("Answer: {a}, {d}", "ad"),
    # Written after the reader was changed, as a check on it (not tuned to).
    ("Let me check each option.\n- {a}: too small.\n- {b}: too large.\n- {c}: matches.\n\n"
     "The answer is {c}.", "c"),
    ("Since the slope is negative, {d} can be ruled out, and {a} has the wrong intercept. "
     "That leaves {b}.", "b"),
    ("I'm fairly confident it's {c}. {a} would need a second catalyst.", "c"),
    ("Answer: {d}\n\nWhy not {a}? Because the series diverges.", "d"),
    ("Option ({b}) is the only one consistent with both clues, whereas ({a}) fails the "
     "first.", "b"),
    ("根据题意，{a}、{b}均不符合，正确答案是{d}。", "d"),
    ("My answer: {a}", "a"),
    ("{c} — the others ({a}, {b}, {d}) each contradict the second sentence.", "c"),
    # Short answers, as before.
    ("{b}", "b"),
    ("({c})", "c"),
    ("{a}. Paris is the capital of France.", "a"),
    ("**{d}** is right since {a} is wrong", "d"),
    ("I choose {b}", "b"),
]  # fmt: skip

# Which letters stand for {a}…{d}: the first assignments of A–D in order, so each style is
# read with the chosen option before and after the others in the alphabet.
ASSIGNMENTS = [*islice(permutations("ABCD"), 0, 24, 4), ("D", "C", "B", "A")]


def answers() -> list[tuple[str, frozenset[str]]]:
    """(answer, the labels a careful reader takes) for every style and assignment."""
    found = []
    for text, chosen in STYLES:
        for letters in ASSIGNMENTS:
            names = dict(zip("abcd", letters, strict=True))
            found.append((text.format(**names), frozenset(names[c] for c in chosen)))
    return found
