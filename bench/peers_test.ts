import { deepStrictEqual } from "node:assert";
import { splitPeersArgs } from "./peers.ts";

Deno.test("splitPeersArgs: the peers flags go to the peers scenario, the rest to the others", () => {
  deepStrictEqual(
    splitPeersArgs([
      "--steps",
      "25",
      "--sdcpp-src",
      "/src/sd",
      "--diffusers-src=/src/df",
      "--peers-images",
      "2",
      "--size",
      "512",
    ]),
    {
      peers: [
        "--sdcpp-src",
        "/src/sd",
        "--diffusers-src",
        "/src/df",
        "--peers-images",
        "2",
        "--size",
        "512",
      ],
      rest: ["--steps", "25", "--size", "512"],
      runPeers: true,
      peersNamed: false,
      runOthers: true,
    },
    "a whole run: both, the shared --size to each",
  );
});

Deno.test("splitPeersArgs: --only peers runs the peers alone; with others, both", () => {
  const alone = splitPeersArgs(["--only", "peers", "--fresh-export", "/exp"]);
  deepStrictEqual(alone.rest, ["--fresh-export", "/exp"]);
  deepStrictEqual(alone.peers, ["--fresh-export", "/exp"]);
  deepStrictEqual([alone.runPeers, alone.peersNamed, alone.runOthers], [true, true, false]);
  const both = splitPeersArgs(["--only=2,peers,fresh"]);
  deepStrictEqual(both.rest, ["--only", "2,fresh"], "peers taken out of the others' --only");
  deepStrictEqual([both.runPeers, both.peersNamed, both.runOthers], [true, true, true]);
  const others = splitPeersArgs(["--only", "1,2"]);
  deepStrictEqual(others.rest, ["--only", "1,2"]);
  deepStrictEqual([others.runPeers, others.runOthers], [false, true]);
});
