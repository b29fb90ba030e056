import assert from "node:assert/strict";
import { PeerLimits } from "./peer_limits.ts";

Deno.test("per-client limits: a share of open connections and a token-bucket connect rate", () => {
  let now = 0;
  const limits = new PeerLimits({ maxOpen: 2, ratePerSecond: 2, burst: 3, now: () => now });
  assert.equal(limits.admit("a"), null);
  assert.equal(limits.admit("a"), null);
  assert.equal(limits.admit("a"), "share");
  assert.equal(limits.admit("a"), "rate", "the refused connect still spent a token");
  assert.equal(limits.admit("b"), null, "another client has its own share and bucket");
  limits.release("a");
  now += 500; // one token back
  assert.equal(limits.admit("a"), null);
  assert.equal(limits.open("a"), 2);
  limits.release("a");
  limits.release("a");
  limits.release("b");
  limits.prune();
  assert.equal(limits.size, 1, "a refilling bucket is kept (a), a full one dropped (b)");
  now += 10_000;
  limits.prune();
  assert.equal(limits.size, 0);
});

Deno.test("a client refused for its rate is told when its next token comes", () => {
  let now = 0;
  const limits = new PeerLimits({ maxOpen: 100, ratePerSecond: 0.5, burst: 1, now: () => now });
  assert.equal(limits.burst, 1);
  assert.equal(limits.nextTokenMs("a"), 0, "an unknown client may connect now");
  assert.equal(limits.admit("a"), null);
  assert.equal(limits.admit("a"), "rate");
  assert.equal(limits.nextTokenMs("a"), 2000);
  now += 1500;
  assert.equal(limits.nextTokenMs("a"), 500);
  now += 500;
  assert.equal(limits.nextTokenMs("a"), 0);
  assert.equal(limits.admit("a"), null);
});
