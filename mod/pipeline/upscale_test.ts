import { deepStrictEqual, ok, strictEqual, throws } from "node:assert";
import { axisWeights, cropTile, TileBlender, tileGrid } from "./upscale.ts";
import type { RgbImage } from "./types.ts";

/**
 * AUTOMATIC1111 `modules/images.py` `split_grid`, restated: `cols = ceil((w −
 * overlap) / (tile − overlap))`, `dx = (w − tile) / (cols − 1)`, `x = int(col ·
 * dx)`, moved to `w − tile` when `x + tile >= w`.
 */
function splitGrid(w: number, tile: number, overlap: number): number[] {
  const cols = Math.ceil((w - overlap) / (tile - overlap));
  const dx = cols > 1 ? (w - tile) / (cols - 1) : 0;
  return Array.from({ length: cols }, (_, c) => {
    const x = Math.trunc(c * dx);
    return x + tile >= w ? w - tile : x;
  });
}

function flat(width: number, height: number, rgb: [number, number, number]): RgbImage {
  const data = new Uint8Array(width * height * 3);
  for (let p = 0; p < width * height; p++) data.set(rgb, p * 3);
  return { width, height, data };
}

Deno.test("tileGrid: tiles placed as the SD upscale script's split_grid places them", () => {
  const square = tileGrid(1024, 1024);
  deepStrictEqual(square.xs, [0, 256, 512]);
  deepStrictEqual(square.ys, [0, 256, 512]);
  strictEqual(square.tiles.length, 9);
  deepStrictEqual(square.tiles[5], { x: 512, y: 256 }, "row-major");
  const landscape = tileGrid(1024, 768);
  deepStrictEqual([landscape.xs, landscape.ys], [[0, 256, 512], [0, 256]]);
  strictEqual(tileGrid(768, 1024).tiles.length, 6);
  deepStrictEqual(tileGrid(512, 512).tiles, [{ x: 0, y: 0 }]);
  for (const w of [512, 600, 768, 1000, 1024, 1536, 2048]) {
    deepStrictEqual(tileGrid(w, 512).xs, splitGrid(w, 512, 64), `width ${w}`);
  }
  throws(() => tileGrid(400, 512), /smaller than a 512-px tile/);
});

Deno.test("axisWeights: ramps over each overlap that sum to exactly 1 with the neighbour's", () => {
  const xs = [0, 256, 512];
  const w = xs.map((_, i) => axisWeights(xs, i, 512));
  strictEqual(w[0][0], 1, "no ramp at the image edge");
  strictEqual(w[2][511], 1);
  ok(w[1][0] > 0 && w[1][0] < 0.01, "a tile starts almost invisible where it overlaps");
  for (let x = 0; x < 1024; x++) {
    let sum = 0;
    xs.forEach((x0, i) => {
      if (x >= x0 && x < x0 + 512) sum += w[i][x - x0];
    });
    ok(Math.abs(sum - 1) < 1e-12, `column ${x}: weights sum to ${sum}`);
  }
});

Deno.test("TileBlender: a flat input stays flat across every tile border, bit for bit", () => {
  for (const [width, height] of [[1024, 1024], [1024, 768], [768, 1024]]) {
    const grid = tileGrid(width, height);
    const blender = new TileBlender(grid);
    grid.tiles.forEach((_, i) => blender.add(i, flat(512, 512, [37, 128, 251])));
    deepStrictEqual(blender.result(), flat(width, height, [37, 128, 251]), `${width}×${height}`);
  }
});

Deno.test("TileBlender: tiles that disagree meet in a ramp over the whole overlap, not a seam", () => {
  const grid = tileGrid(1024, 512);
  const blender = new TileBlender(grid);
  const values = [0, 200, 40];
  values.forEach((v, i) => blender.add(i, flat(512, 512, [v, v, v])));
  const out = blender.result();
  const row = Array.from({ length: 1024 }, (_, x) => out.data[(100 * 1024 + x) * 3]);
  // Every step between neighbouring columns is a share of the difference spread over 256 px.
  for (let x = 1; x < 1024; x++) {
    ok(Math.abs(row[x] - row[x - 1]) <= 1, `columns ${x - 1}→${x}: ${row[x - 1]} → ${row[x]}`);
  }
  strictEqual(row[100], 0, "only tile 0 reaches here");
  strictEqual(row[511], 200, "the middle of tile 1 is tile 1");
  strictEqual(row[1000], 40);
  strictEqual(row[384], 100, "half way through the first overlap");
  const lastRow = Array.from({ length: 1024 }, (_, x) => out.data[(511 * 1024 + x) * 3]);
  deepStrictEqual(lastRow, row, "one tile row: every row is the same");
});

Deno.test("TileBlender and cropTile: misuse is refused", () => {
  const grid = tileGrid(1024, 512);
  const blender = new TileBlender(grid);
  throws(() => blender.add(3, flat(512, 512, [0, 0, 0])), /tile 3 is not in the grid of 3/);
  throws(() => blender.add(0, flat(256, 512, [0, 0, 0])), /expected 512²/);
  blender.add(0, flat(512, 512, [0, 0, 0]));
  throws(() => blender.add(0, flat(512, 512, [0, 0, 0])), /added twice/);
  throws(() => blender.result(), /1 of 3 tiles were added/);
  const image = flat(1024, 512, [1, 2, 3]);
  image.data[(5 * 1024 + 600) * 3] = 99;
  const tile = cropTile(image, { x: 512, y: 0 });
  strictEqual(tile.data[(5 * 512 + 88) * 3], 99);
  throws(() => cropTile(image, { x: 600, y: 0 }), /outside the 1024×512 image/);
});
