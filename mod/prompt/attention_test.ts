import { deepStrictEqual, throws } from "node:assert";
import { isBreak, parsePromptAttention, PromptSyntaxError } from "./attention.ts";

// Expected values: the doctests of `parse_prompt_attention` in AUTOMATIC1111/stable-diffusion-webui
// `modules/prompt_parser.py` at commit 0674fabd0d82c69c02ff362762815c4536687b95, and (below them)
// results worked by hand through the same function's rules.

Deno.test("parsePromptAttention: AUTOMATIC1111's doctests", () => {
  deepStrictEqual(parsePromptAttention("normal text"), [["normal text", 1.0]]);
  deepStrictEqual(parsePromptAttention("an (important) word"), [
    ["an ", 1.0],
    ["important", 1.1],
    [" word", 1.0],
  ]);
  deepStrictEqual(parsePromptAttention("(unbalanced"), [["unbalanced", 1.1]]);
  deepStrictEqual(parsePromptAttention("\\(literal\\]"), [["(literal]", 1.0]]);
  deepStrictEqual(parsePromptAttention("(unnecessary)(parens)"), [["unnecessaryparens", 1.1]]);
  deepStrictEqual(parsePromptAttention("a (((house:1.3)) [on] a (hill:0.5), sun, (((sky)))."), [
    ["a ", 1.0],
    ["house", 1.5730000000000004],
    [" ", 1.1],
    ["on", 1.0],
    [" a ", 1.1],
    ["hill", 0.55],
    [", sun, ", 1.1],
    ["sky", 1.4641000000000006],
    [".", 1.1],
  ]);
});

Deno.test("parsePromptAttention: explicit weights, nesting order and square brackets", () => {
  // (a:1.5) multiplies by 1.5; in ((a:1.5)) the inner pair (the weight) applies first, then 1.1.
  deepStrictEqual(parsePromptAttention("(masterpiece:1.2), best"), [
    ["masterpiece", 1.2],
    [", best", 1.0],
  ]);
  deepStrictEqual(parsePromptAttention("((a:1.5))"), [["a", 1.5 * 1.1]]);
  deepStrictEqual(parsePromptAttention("[blurry]"), [["blurry", 1 / 1.1]]);
  deepStrictEqual(parsePromptAttention("[[blurry]]"), [["blurry", 1 / 1.1 / 1.1]]);
  // Forms float() reads: a sign, a leading or trailing dot.
  deepStrictEqual(parsePromptAttention("(a:.5)(b:2.)(c:+1)(d:-1)"), [
    ["a", 0.5],
    ["b", 2],
    ["c", 1],
    ["d", -1],
  ]);
  // Python's \d and float() read the digits of every script.
  deepStrictEqual(parsePromptAttention("(a:\u0661.\u0665)"), [["a", 1.5]]);
  // A weight with nothing open is text; so is a lone colon.
  deepStrictEqual(parsePromptAttention("a:1.2) b: c"), [["a:1.2) b: c", 1.0]]);
});

Deno.test("parsePromptAttention: unbalanced brackets apply to the end, stray closers are text", () => {
  deepStrictEqual(parsePromptAttention("a (b [c"), [
    ["a ", 1.0],
    ["b ", 1.1],
    ["c", 1.1 / 1.1],
  ]);
  deepStrictEqual(parsePromptAttention("a) b]"), [["a) b]", 1.0]]);
  // A `]` does not close a `(`: the `(` stays open to the end, the `]` is text.
  deepStrictEqual(parsePromptAttention("(a] b"), [["a] b", 1.1]]);
  // Left open: round brackets apply first, then square ones. The order shows in the last bit:
  // 1.3 × 1.1 × (1/1.1) is 1.3, 1.3 × (1/1.1) × 1.1 is 1.3000000000000003 (AUTOMATIC1111 gives 1.3).
  deepStrictEqual(parsePromptAttention("[(a (x:1.3) b"), [["a ", 1.0], ["x", 1.3], [" b", 1.0]]);
  deepStrictEqual(parsePromptAttention("[x (y"), [
    ["x ", 1 / 1.1],
    ["y", 1.1 * (1 / 1.1)],
  ]);
});

Deno.test("parsePromptAttention: escapes and a lone backslash", () => {
  deepStrictEqual(parsePromptAttention("\\(a\\) \\[b\\] c\\\\d"), [["(a) [b] c\\d", 1.0]]);
  // re_attention's lone `\\` alternative keeps text[1:], the empty string: the backslash goes.
  deepStrictEqual(parsePromptAttention("a\\b"), [["ab", 1.0]]);
  // An escaped bracket inside a group has the group's weight.
  deepStrictEqual(parsePromptAttention("(\\(x\\))"), [["(x)", 1.1]]);
});

Deno.test("parsePromptAttention: BREAK, a whole word, with its spaces removed", () => {
  const parsed = parsePromptAttention("a cat BREAK a dog");
  deepStrictEqual(parsed, [["a cat", 1.0], ["BREAK", -1], ["a dog", 1.0]]);
  deepStrictEqual(parsed.map(isBreak), [false, true, false]);
  // Not inside another word, not lowercase.
  deepStrictEqual(parsePromptAttention("BREAKING break xBREAK"), [["BREAKING break xBREAK", 1.0]]);
  // Python's \b is Unicode-aware: a letter of any script joins the word.
  deepStrictEqual(parsePromptAttention("\u00e9BREAK"), [["\u00e9BREAK", 1.0]]);
  // At the start and end, and across newlines.
  deepStrictEqual(parsePromptAttention("BREAK a\nBREAK\n"), [
    ["", 1.0],
    ["BREAK", -1],
    ["a", 1.0],
    ["BREAK", -1],
    ["", 1.0],
  ]);
  // Inside brackets the marker's -1 is multiplied like any weight, so it is no longer a BREAK
  // (-1.1): AUTOMATIC1111 then reads it as the text "BREAK".
  const inside = parsePromptAttention("(a BREAK b)");
  deepStrictEqual(inside, [["a", 1.1], ["BREAK", -1.1], ["b", 1.1]]);
  deepStrictEqual(inside.map(isBreak), [false, false, false]);
});

Deno.test("parsePromptAttention: empty prompt, merged runs", () => {
  deepStrictEqual(parsePromptAttention(""), [["", 1.0]]);
  deepStrictEqual(parsePromptAttention("()"), [["", 1.0]]);
  // Equal weights from different groups merge; 1.1 and (x:1.1) are equal.
  deepStrictEqual(parsePromptAttention("(a)(b:1.1) c"), [["ab", 1.1], [" c", 1.0]]);
  // AND stays text (composable prompts are not read here).
  deepStrictEqual(parsePromptAttention("a cat AND a dog"), [["a cat AND a dog", 1.0]]);
});

Deno.test("parsePromptAttention: a weight float() refuses is an error naming it", () => {
  throws(() => parsePromptAttention("(a:1.2.3)"), (e: unknown) => {
    return e instanceof PromptSyntaxError && e.message.includes('"1.2.3"');
  });
  throws(() => parsePromptAttention("(a:.)"), PromptSyntaxError);
});

/**
 * Random mixes of the syntax's pieces (escapes, lone backslashes, weights that open nothing, BREAK
 * glued to brackets and colons), each with the result of AUTOMATIC1111's own `parse_prompt_attention`
 * (modules/prompt_parser.py at commit 0674fabd0d82c69c02ff362762815c4536687b95) run on it.
 */
const A1111_RESULTS: Array<[string, Array<[string, number]>]> = [
  ["\\(:0.5), )[", [["(:0.5), )", 1.0]]],
  ["BREAK]:1.3)cat) BREAK \\[)[", [["", 1.0], ["BREAK", -1], ["]:1.3)cat)", 1.0], ["BREAK", -1], [
    "[)",
    1.0,
  ]]],
  [":.5)[\\][BREAK:.5)", [[":.5)", 1.0], ["]", 0.9090909090909091], ["", 0.8264462809917354], [
    "BREAK",
    -0.8264462809917354,
  ], [":.5)", 0.8264462809917354]]],
  [":1.2.3)cat]", [[":1.2.3)cat]", 1.0]]],
  [", , cat)", [[", , cat)", 1.0]]],
  ["cat:0.5))\\])BREAK\\(", [["cat:0.5))])", 1.0], ["BREAK", -1], ["(", 1.0]]],
  [":.5)\\(BREAK]cat", [[":.5)(", 1.0], ["BREAK", -1], ["]cat", 1.0]]],
  ["BREAK:1.2.3) \\)]", [["", 1.0], ["BREAK", -1], [":1.2.3) )]", 1.0]]],
  ["cat, \\[:1.3)]BREAKa", [["cat, [:1.3)]BREAKa", 1.0]]],
  ["cat)dog", [["cat)dog", 1.0]]],
  [":-1) BREAK:.5)", [[":-1)", 1.0], ["BREAK", -1], [":.5)", 1.0]]],
  ["::2.)cat:2.):1.3)\\\\]1.2\\)", [["::2.)cat:2.):1.3)\\]1.2)", 1.0]]],
  ["\n\\][cat\\ BREAK :-1):", [["\n]", 1.0], ["cat", 0.9090909090909091], [
    "BREAK",
    -0.9090909090909091,
  ], [":-1):", 0.9090909090909091]]],
  [":2.)\\dog[] BREAK :.5)\\)", [[":2.)dog", 1.0], ["BREAK", -1], [":.5))", 1.0]]],
  [":\\(:-1):.5)) [\nBREAK", [[":(:-1):.5)) ", 1.0], ["", 0.9090909090909091], [
    "BREAK",
    -0.9090909090909091,
  ], ["", 0.9090909090909091]]],
  ["1.2:1.2.3)::a:1.3)dog", [["1.2:1.2.3)::a:1.3)dog", 1.0]]],
  ["cat1.2:2.)[:1.2.3)[", [["cat1.2:2.)", 1.0], [":1.2.3)", 0.9090909090909091]]],
  [":-1)a [)", [[":-1)a ", 1.0], [")", 0.9090909090909091]]],
  ["a\\, cat :1.2.3):2.)\\", [["a, cat :1.2.3):2.)", 1.0]]],
  [":0.5) :1.3)(:2.):1.3)\\)dog", [[":0.5) :1.3):1.3))dog", 1.0]]],
  [":-1))\\[", [[":-1))[", 1.0]]],
  ["\\\\(é\\]:0.5):0.5):-1)[\\)", [["\\", 1.0], ["é]", 0.5], [":0.5):-1)", 1.0], [
    ")",
    0.9090909090909091,
  ]]],
  [":0.5)BREAK\\\\\\(:1.2.3):.5)", [[":0.5)", 1.0], ["BREAK", -1], ["\\(:1.2.3):.5)", 1.0]]],
  ["BREAK\\\\a:.5):1.3) :0.5)\\]\\(", [["", 1.0], ["BREAK", -1], ["\\a:.5):1.3) :0.5)](", 1.0]]],
  ["\\)\\(\\]", [[")(]", 1.0]]],
  ["\\](:-1):1.2.3)cat\\)\\\\\\", [["]:1.2.3)cat)\\", 1.0]]],
  ["\\(:.5)BREAK", [["(:.5)", 1.0], ["BREAK", -1], ["", 1.0]]],
  ["dogcat:\\(a", [["dogcat:(a", 1.0]]],
  [" BREAK dog,  é):2.)\n ", [["", 1.0], ["BREAK", -1], ["dog,  é):2.)\n ", 1.0]]],
  ["BREAK:0.5):0.5):0.5):0.5)]:-1), :0.5)", [["", 1.0], ["BREAK", -1], [
    ":0.5):0.5):0.5):0.5)]:-1), :0.5)",
    1.0,
  ]]],
];

Deno.test("parsePromptAttention: random mixes give what AUTOMATIC1111's function gives", () => {
  for (const [text, expected] of A1111_RESULTS) {
    deepStrictEqual(parsePromptAttention(text), expected, JSON.stringify(text));
  }
});
