import assert from "node:assert/strict";
import { FAIR_SHARE_FLOOR, type FairDecision, FairShare, fairShare } from "./fair_share.ts";

Deno.test("the share is an equal split of the budget, never below the floor nor above the budget", () => {
  assert.equal(FAIR_SHARE_FLOOR, 4);
  assert.equal(fairShare(128, 1), 128);
  assert.equal(fairShare(128, 2), 64);
  assert.equal(fairShare(128, 21), 6);
  assert.equal(fairShare(128, 100), 4, "the floor");
  assert.equal(fairShare(2, 1), 2, "at most the budget");
  assert.equal(fairShare(512, 0), 512);
});

/** A budget filled with `holdings` (address → how many), in that order. */
function filled(budget: number, holdings: Array<[string, number]>, evictWithinShare = true) {
  const share = new FairShare<string>({ budget, evictWithinShare });
  for (const [address, count] of holdings) {
    for (let i = 0; i < count; i++) share.add(address, `${address}#${i}`);
  }
  return share;
}

function evicted(decision: FairDecision<string>): string {
  assert.equal(decision.kind, "evict", JSON.stringify(decision));
  return (decision as { item: string }).item;
}

Deno.test("one address holding nearly all: a newcomer from another takes the flood's oldest", () => {
  const share = filled(128, [["flood", 127], ["victim", 1]]);
  assert.equal(share.full, true);
  const d = share.decide("other");
  assert.equal(evicted(d), "flood#0");
  assert.deepEqual(d.kind === "evict" && [d.holder, d.held], ["flood", 127]);
  // The victim's own second connection still gets in (1 held, share 42).
  assert.equal(evicted(share.decide("victim")), "flood#0");
});

Deno.test("the flood's own newcomer is refused at once: it holds its share or more", () => {
  const share = filled(128, [["flood", 127], ["victim", 1]]);
  assert.deepEqual(share.decide("flood"), {
    kind: "refuse",
    reason: "over-share",
    held: 127,
    share: 64,
    addresses: 2,
  });
  // Alone, its share is the whole budget: still refused, not its own oldest evicted.
  const alone = filled(8, [["flood", 8]]);
  assert.deepEqual(alone.decide("flood"), {
    kind: "refuse",
    reason: "over-share",
    held: 8,
    share: 8,
    addresses: 1,
  });
});

Deno.test("an address within its share is never taken from while another holds more than its share", () => {
  // 20 flooding addresses and a victim holding 3 (its share is 6: 128 / 21).
  const holdings: Array<[string, number]> = [["victim", 3]];
  for (let i = 0; i < 20; i++) holdings.push([`flood${i}`, i < 5 ? 10 : 5]);
  const share = filled(128, holdings);
  assert.equal(share.size, 3 + 50 + 75);
  for (const newcomer of ["victim", "flood7", "fresh"]) {
    const d = share.decide(newcomer);
    assert.equal(d.kind, "evict");
    assert.match(d.kind === "evict" ? d.holder : "", /^flood[0-4]$/);
  }
  // A flooder over its share is refused rather than taken from an equal.
  assert.equal(share.decide("flood0").kind, "refuse");
  // The largest holders tie: the one whose oldest connection is oldest gives way.
  assert.equal(evicted(share.decide("fresh")), "flood0#0");
});

Deno.test("a slot moves only from an address holding at least two more than the newcomer", () => {
  // Share 4 (the floor): b holds 5 (over), a holds 4.
  const share = filled(9, [["a", 4], ["b", 5]]);
  assert.equal(share.decide("a").kind, "refuse", "a at its share, b only one more");
  assert.equal(evicted(share.decide("c")), "b#0");
  share.delete("b", "b#0");
  share.add("c", "c#0");
  // Now a 4, b 4, c 1: nobody over the floor; the oldest of the largest goes (a's).
  assert.equal(evicted(share.decide("d")), "a#0");
});

Deno.test("every address within its share: the oldest of the largest holders goes, or the newcomer is refused", () => {
  // 128 addresses with one each, as an idle flood from many addresses.
  const holdings: Array<[string, number]> = [];
  for (let i = 0; i < 128; i++) holdings.push([`a${i}`, 1]);
  assert.equal(evicted(filled(128, holdings).decide("new")), "a0#0");
  assert.deepEqual(filled(128, holdings, false).decide("new"), {
    kind: "refuse",
    reason: "full",
    held: 0,
    share: 4,
    addresses: 129,
  });
});

Deno.test("within the holder that gives way, the lowest rank goes first, then the oldest", () => {
  const rank = new Map<string, number>();
  const share = new FairShare<string>({
    budget: 12,
    evictWithinShare: false,
    rank: (item) => rank.get(item)!,
  });
  const add = (holder: string, item: string, r: number) => {
    rank.set(item, r);
    share.add(holder, item);
  };
  // Being answered (2), sending its body (1), sending its head (0).
  [2, 1, 0, 0, 2, 2, 2, 2, 2, 2].forEach((r, i) => add("flood", `f${i + 1}`, r));
  add("victim", "v1", 0);
  add("victim", "v2", 2);
  assert.equal(evicted(share.decide("victim")), "f3");
  share.delete("flood", "f3");
  share.delete("flood", "f4");
  add("victim", "v3", 0);
  add("victim", "v4", 0);
  assert.equal(evicted(share.decide("other")), "f2");
  share.delete("flood", "f2");
  add("other", "o1", 0);
  assert.equal(evicted(share.decide("other")), "f1");
});

Deno.test("a proxy's connection moves to the client its head names, keeping its age", () => {
  const share = filled(4, [["proxy", 3], ["x", 1]]);
  share.move("proxy", "client", "proxy#0");
  assert.equal(share.held("proxy"), 2);
  assert.equal(share.held("client"), 1);
  assert.equal(share.addresses, 3);
  assert.equal(share.size, 4);
  // client's slot is still the oldest: among the holders of 1 it goes first in a tie.
  share.delete("proxy", "proxy#1");
  share.delete("proxy", "proxy#2");
  share.add("y", "y#0");
  share.add("z", "z#0");
  assert.equal(evicted(share.decide("new")), "proxy#0");
  assert.equal(share.delete("nobody", "proxy#0"), false);
});
