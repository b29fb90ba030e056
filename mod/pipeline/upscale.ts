/**
 * The tiles of an upscale and how they are put back together. The image,
 * already enlarged with PIL's Lanczos to the output size, is cut into
 * 512×512 tiles (the size SD 1.5 works at) placed as AUTOMATIC1111's "SD
 * upscale" script places them (stable-diffusion-webui `modules/images.py`
 * `split_grid`: `cols = ceil((w − overlap) / (tile − overlap))` with a minimum
 * overlap of 64 px, the tiles spread evenly, the last one flush with the
 * edge), each tile is refined by its own image-to-image run, and the refined
 * tiles are blended in pixel space.
 *
 * The blend is a feathered average over the whole overlap: along each axis a
 * tile's weight rises linearly across its overlap with the previous tile and
 * falls across its overlap with the next (weight 1 where no other tile
 * reaches), the 2-D weight is the product, and every output pixel is the
 * weighted mean of the tiles covering it. Neighbouring ramps sum to 1, so a
 * crossfade never darkens or brightens, a region where the tiles agree comes
 * out exactly as they are (a flat input stays flat, bit for bit), and where
 * two refinements differ the difference is spread over the whole overlap
 * instead of meeting at a line. At 1024 px the tiles overlap by 256 px (3
 * tiles per 1024-px side, 2 per 768-px side), so the ramp is 4× as long as
 * the 64-px one `combine_grid` pastes with. Pixel space, not latent space:
 * every tile then is exactly one image-to-image run at 512×512 (VAE encode,
 * denoise, VAE decode), so memory stays that of a 512×512 generation, where a
 * latent-space blend needs the whole 1024×1024 canvas through the VAE
 * decoder at once or a tiled decode with its own seams.
 *
 * @module
 */

import type { RgbImage } from "./types.ts";

/** Side of a tile in pixels: SD 1.5's native 512. */
export const TILE_SIZE = 512;

/** Least overlap between neighbouring tiles (the SD upscale script's default). */
export const MIN_TILE_OVERLAP = 64;

/** One tile: its top-left corner in the image; its size is {@link TILE_SIZE}. */
export interface Tile {
  /** Left edge in pixels. */
  x: number;
  /** Top edge in pixels. */
  y: number;
}

/** The tiles of an image, row by row, and the ramps they are blended with. */
export interface TileGrid {
  /** Image width. */
  width: number;
  /** Image height. */
  height: number;
  /** Tile side. */
  tile: number;
  /** Left edges of the columns. */
  xs: number[];
  /** Top edges of the rows. */
  ys: number[];
  /** Tiles in row-major order (`tiles[r · xs.length + c]`). */
  tiles: Tile[];
}

/** Tile positions along one axis (`split_grid`: even spacing, `int()`, last flush). */
function positions(size: number, tile: number, overlap: number): number[] {
  if (size < tile) {
    throw new RangeError(`an image side of ${size} px is smaller than a ${tile}-px tile`);
  }
  const count = Math.ceil((size - overlap) / (tile - overlap));
  const step = count > 1 ? (size - tile) / (count - 1) : 0;
  return Array.from({ length: count }, (_, i) => {
    const at = Math.floor(i * step);
    return at + tile >= size ? size - tile : at;
  });
}

/** The tiles covering a `width`×`height` image. */
export function tileGrid(
  width: number,
  height: number,
  tile: number = TILE_SIZE,
  minOverlap: number = MIN_TILE_OVERLAP,
): TileGrid {
  if (!(minOverlap >= 0 && minOverlap < tile)) {
    throw new RangeError(`overlap must be in [0, ${tile}), got ${minOverlap}`);
  }
  const xs = positions(width, tile, minOverlap);
  const ys = positions(height, tile, minOverlap);
  const tiles = ys.flatMap((y) => xs.map((x) => ({ x, y })));
  return { width, height, tile, xs, ys, tiles };
}

/**
 * The weight of each pixel of the tile at `starts[i]` along one axis: it
 * rises over the overlap with the tile before, `(u + ½) / overlap`, falls
 * over the overlap with the tile after, `(tile − u − ½) / overlap`, and is 1
 * elsewhere; the two ramps of one overlap sum to exactly 1.
 */
export function axisWeights(starts: readonly number[], i: number, tile: number): Float64Array {
  const w = new Float64Array(tile).fill(1);
  const before = i > 0 ? starts[i - 1] + tile - starts[i] : 0;
  const after = i < starts.length - 1 ? starts[i] + tile - starts[i + 1] : 0;
  for (let u = 0; u < tile; u++) {
    if (before > 0 && u < before) w[u] = Math.min(w[u], (u + 0.5) / before);
    if (after > 0 && u >= tile - after) w[u] = Math.min(w[u], (tile - u - 0.5) / after);
  }
  return w;
}

/** The tile at `t` cut out of `image`. */
export function cropTile(image: RgbImage, t: Tile, tile: number = TILE_SIZE): RgbImage {
  if (t.x < 0 || t.y < 0 || t.x + tile > image.width || t.y + tile > image.height) {
    throw new RangeError(
      `tile ${tile}×${tile} at (${t.x}, ${t.y}) is outside the ${image.width}×${image.height} image`,
    );
  }
  const data = new Uint8Array(tile * tile * 3);
  const row = tile * 3;
  for (let y = 0; y < tile; y++) {
    const from = ((t.y + y) * image.width + t.x) * 3;
    data.set(image.data.subarray(from, from + row), y * row);
  }
  return { width: tile, height: tile, data };
}

/** Accumulates refined tiles into the feathered average (see the module documentation). */
export class TileBlender {
  readonly #grid: TileGrid;
  readonly #sum: Float64Array;
  readonly #weight: Float64Array;
  readonly #wx: Float64Array[];
  readonly #wy: Float64Array[];
  readonly #added = new Set<number>();

  /** An empty canvas for `grid`. */
  constructor(grid: TileGrid) {
    this.#grid = grid;
    this.#sum = new Float64Array(grid.width * grid.height * 3);
    this.#weight = new Float64Array(grid.width * grid.height);
    this.#wx = grid.xs.map((_, i) => axisWeights(grid.xs, i, grid.tile));
    this.#wy = grid.ys.map((_, i) => axisWeights(grid.ys, i, grid.tile));
  }

  /** Adds the refined tile number `index` (row-major, as in {@link TileGrid.tiles}). */
  add(index: number, image: RgbImage): void {
    const g = this.#grid;
    const t = g.tiles[index];
    if (!t) throw new RangeError(`tile ${index} is not in the grid of ${g.tiles.length}`);
    if (image.width !== g.tile || image.height !== g.tile) {
      throw new RangeError(`tile ${index} is ${image.width}×${image.height}, expected ${g.tile}²`);
    }
    if (this.#added.has(index)) throw new Error(`tile ${index} was added twice`);
    this.#added.add(index);
    const wx = this.#wx[g.xs.indexOf(t.x)];
    const wy = this.#wy[g.ys.indexOf(t.y)];
    for (let v = 0; v < g.tile; v++) {
      const row = (t.y + v) * g.width + t.x;
      for (let u = 0; u < g.tile; u++) {
        const w = wx[u] * wy[v];
        const p = row + u;
        const s = (v * g.tile + u) * 3;
        this.#weight[p] += w;
        this.#sum[p * 3] += w * image.data[s];
        this.#sum[p * 3 + 1] += w * image.data[s + 1];
        this.#sum[p * 3 + 2] += w * image.data[s + 2];
      }
    }
  }

  /** The blended image; every tile must have been added. */
  result(): RgbImage {
    const g = this.#grid;
    if (this.#added.size !== g.tiles.length) {
      throw new Error(`${this.#added.size} of ${g.tiles.length} tiles were added`);
    }
    const data = new Uint8Array(g.width * g.height * 3);
    for (let p = 0; p < this.#weight.length; p++) {
      const w = this.#weight[p];
      for (let c = 0; c < 3; c++) {
        data[p * 3 + c] = Math.min(255, Math.max(0, Math.round(this.#sum[p * 3 + c] / w)));
      }
    }
    return { width: g.width, height: g.height, data };
  }
}
