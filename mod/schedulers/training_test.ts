import { strictEqual, throws } from "node:assert";
import { alphaPrevAt, finalAlphaCumprod } from "./training.ts";

const ac = new Float32Array([0.75, 0.5, 0.25]);

Deno.test("training: final_alpha_cumprod is 1 with set_alpha_to_one, else ᾱ_0", () => {
  strictEqual(finalAlphaCumprod(ac, true), 1);
  strictEqual(finalAlphaCumprod(ac, false), 0.75);
});

Deno.test("training: alpha_prod_t_prev falls back to the final ᾱ below timestep 0", () => {
  strictEqual(alphaPrevAt(ac, 2, 1), 0.25);
  strictEqual(alphaPrevAt(ac, 0, 1), 0.75);
  strictEqual(alphaPrevAt(ac, -1, 1), 1);
  strictEqual(alphaPrevAt(ac, -20, 0.75), 0.75);
  throws(() => alphaPrevAt(ac, 3, 1), /0\.\.2, got 3/);
});
