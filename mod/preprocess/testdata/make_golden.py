#!/usr/bin/env python3
"""Regenerates the golden fixtures of mod/preprocess with the real OpenCV.

Run from the repository root with a Python that has cv2 and numpy
(Debian: `apt-get install python3-opencv`; the committed files were made with
OpenCV 4.6.0 and numpy 1.24):

    /usr/bin/python3 mod/preprocess/testdata/make_golden.py
    deno fmt mod/preprocess/testdata

Outputs (all in this folder):
- pose_<scene>.rgb.gz: raw RGB canvases, drawn from pose_scenes.json the way
  controlnet_aux `open_pose/util.py` draws (cv2.ellipse2Poly + fillConvexPoly
  for limbs at 0.6 of the colour, cv2.circle for joints, cv2.line thickness 2
  in matplotlib hsv colours for hand edges, white face points).
- opencv_kernels.json + opencv_kernels.bin.gz: inputs are a formula shared
  with the TypeScript test; outputs of cv2.resize (linear, area, lanczos4),
  cv2.getAffineTransform + cv2.warpAffine and cv2.ellipse2Poly.
The TypeScript tests never need cv2; they read these files.
"""
import gzip
import json
import math
import os

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

LIMBS = [[2, 3], [2, 6], [3, 4], [4, 5], [6, 7], [7, 8], [2, 9], [9, 10], [10, 11], [2, 12],
         [12, 13], [13, 14], [2, 1], [1, 15], [15, 17], [1, 16], [16, 18]]
COLORS = [[255, 0, 0], [255, 85, 0], [255, 170, 0], [255, 255, 0], [170, 255, 0], [85, 255, 0],
          [0, 255, 0], [0, 255, 85], [0, 255, 170], [0, 255, 255], [0, 170, 255], [0, 85, 255],
          [0, 0, 255], [85, 0, 255], [170, 0, 255], [255, 0, 255], [255, 0, 170], [255, 0, 85]]
HAND_EDGES = [[0, 1], [1, 2], [2, 3], [3, 4], [0, 5], [5, 6], [6, 7], [7, 8], [0, 9], [9, 10],
              [10, 11], [11, 12], [0, 13], [13, 14], [14, 15], [15, 16], [0, 17], [17, 18],
              [18, 19], [19, 20]]
EPS = 0.01


def hsv_to_rgb(h, s, v):
    # matplotlib.colors.hsv_to_rgb for one colour (float64).
    i = int(h * 6.0)
    f = h * 6.0 - i
    p, q, t = v * (1.0 - s), v * (1.0 - s * f), v * (1.0 - s * (1.0 - f))
    return [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)][i % 6]


def draw_body(canvas, kps):
    for (a, b), color in zip(LIMBS, COLORS):
        k1, k2 = kps[a - 1], kps[b - 1]
        if k1 is None or k2 is None:
            continue
        ys = np.array([k1["y"], k2["y"]])
        xs = np.array([k1["x"], k2["x"]])
        my, mx = np.mean(ys), np.mean(xs)
        length = ((ys[0] - ys[1]) ** 2 + (xs[0] - xs[1]) ** 2) ** 0.5
        angle = math.degrees(math.atan2(ys[0] - ys[1], xs[0] - xs[1]))
        poly = cv2.ellipse2Poly((int(mx), int(my)), (int(length / 2), 4), int(angle), 0, 360, 1)
        cv2.fillConvexPoly(canvas, poly, [int(float(c) * 0.6) for c in color])
    for k, color in zip(kps, COLORS):
        if k is not None:
            cv2.circle(canvas, (int(k["x"]), int(k["y"])), 4, color, thickness=-1)


def draw_hand(canvas, kps):
    if not kps:
        return
    for i, (a, b) in enumerate(HAND_EDGES):
        k1, k2 = kps[a], kps[b]
        if k1 is None or k2 is None:
            continue
        x1, y1, x2, y2 = int(k1["x"]), int(k1["y"]), int(k2["x"]), int(k2["y"])
        if x1 > EPS and y1 > EPS and x2 > EPS and y2 > EPS:
            color = np.array(hsv_to_rgb(i / float(len(HAND_EDGES)), 1.0, 1.0)) * 255
            cv2.line(canvas, (x1, y1), (x2, y2), color, thickness=2)
    for k in kps:
        if k is not None and int(k["x"]) > EPS and int(k["y"]) > EPS:
            cv2.circle(canvas, (int(k["x"]), int(k["y"])), 4, (0, 0, 255), thickness=-1)


def draw_face(canvas, kps):
    if not kps:
        return
    for k in kps:
        if k is not None and int(k["x"]) > EPS and int(k["y"]) > EPS:
            cv2.circle(canvas, (int(k["x"]), int(k["y"])), 3, (255, 255, 255), thickness=-1)


def draw_scene(scene, parts):
    canvas = np.zeros((scene["height"], scene["width"], 3), np.uint8)
    for person in scene["people"]:
        if parts["body"]:
            draw_body(canvas, person["body"])
        if parts["hands"]:
            draw_hand(canvas, person["leftHand"])
            draw_hand(canvas, person["rightHand"])
        if parts["face"]:
            draw_face(canvas, person["face"])
    return canvas


def pattern(w, h):
    # Must match patternImage() in the TypeScript tests.
    y, x, c = np.mgrid[0:h, 0:w, 0:3]
    return ((x * 37 + y * 61 + c * 89 + ((x * y * 7 + c * 13) % 23) * 5) % 256).astype(np.uint8)


def primitives(blobs_append):
    # 300 random limb ellipses, filled circles and thick lines on a 160x120 canvas, many of
    # them partly outside it; the canvas after each 100 operations is stored.
    rng = np.random.default_rng(7)
    w, h = 160, 120
    canvas = np.zeros((h, w, 3), np.uint8)
    ops = []
    for i in range(300):
        kind = int(rng.integers(0, 4))
        col = [int(v) for v in rng.integers(0, 256, 3)]
        if kind == 0:
            c = [int(rng.integers(-30, w + 30)), int(rng.integers(-30, h + 30))]
            ax = [int(rng.integers(0, 60)), int(rng.integers(0, 8))]
            ang = int(rng.integers(-180, 181))
            cv2.fillConvexPoly(canvas, cv2.ellipse2Poly(tuple(c), tuple(ax), ang, 0, 360, 1), col)
            ops.append({"kind": "ellipse", "center": c, "axes": ax, "angle": ang, "color": col})
        elif kind == 1:
            c = [int(rng.integers(-10, w + 10)), int(rng.integers(-10, h + 10))]
            r = int(rng.integers(0, 7))
            cv2.circle(canvas, tuple(c), r, col, thickness=-1)
            ops.append({"kind": "circle", "center": c, "radius": r, "color": col})
        else:
            p1 = [int(rng.integers(-40, w + 40)), int(rng.integers(-40, h + 40))]
            p2 = [int(rng.integers(-40, w + 40)), int(rng.integers(-40, h + 40))]
            if rng.random() < 0.2:
                p2 = [p1[0] + int(rng.integers(-3, 4)), p1[1] + int(rng.integers(-3, 4))]
            t = int(rng.integers(1, 4))
            fcol = [v + 0.5 for v in col]  # float colours round half to even, like hsv colours
            cv2.line(canvas, tuple(p1), tuple(p2), fcol, thickness=t)
            ops.append({"kind": "line", "p1": p1, "p2": p2, "thickness": t, "color": fcol})
        if i % 100 == 99:
            blobs_append({"op": "primitives", "after": i + 1, "src": [w, h], "dst": [w, h]}, canvas.copy())
    return ops


def main():
    with open(os.path.join(HERE, "pose_scenes.json")) as fh:
        scenes = json.load(fh)["scenes"]
    for scene in scenes:
        renders = [(scene["name"], scene["parts"])]
        if scene["name"] == "full":
            renders.append(("full_body_only", {"body": True, "hands": False, "face": False}))
        for name, parts in renders:
            with gzip.GzipFile(os.path.join(HERE, f"pose_{name}.rgb.gz"), "wb", mtime=0) as fh:
                fh.write(draw_scene(scene, parts).tobytes())

    cases, blobs, offset = [], [], 0

    def add(entry, arr):
        nonlocal offset
        data = np.ascontiguousarray(arr).tobytes()
        entry.update({"offset": offset, "length": len(data)})
        cases.append(entry)
        blobs.append(data)
        offset += len(data)

    for op, interp, sizes in [
        ("linear", cv2.INTER_LINEAR, [((88, 64), (64, 48)), ((37, 23), (50, 31)), ((40, 30), (20, 15)),
                                      ((64, 48), (80, 60)), ((33, 70), (16, 9))]),
        ("lanczos4", cv2.INTER_LANCZOS4, [((32, 24), (44, 32)), ((24, 32), (32, 44)), ((37, 23), (50, 31))]),
        ("area", cv2.INTER_AREA, [((88, 64), (64, 48)), ((60, 45), (20, 15)), ((40, 30), (20, 15)),
                                  ((37, 23), (19, 11))]),
    ]:
        for (sw, sh), (dw, dh) in sizes:
            add({"op": op, "src": [sw, sh], "dst": [dw, dh]},
                cv2.resize(pattern(sw, sh), (dw, dh), interpolation=interp))

    # mmpose-style crops: float32 point triplets, as get_warp_matrix builds them.
    for cx, cy, sw_ in [(30.3, 22.7, 40.5), (10.25, 40.0, 18.0), (50.9, 5.1, 70.0)]:
        src = np.zeros((3, 2), np.float32)
        src[0] = [cx, cy]
        src[1] = np.array([cx, cy]) + np.array([0.0, sw_ * -0.5])
        d = src[0] - src[1]
        src[2] = src[1] + np.r_[-d[1], d[0]]
        dst = np.zeros((3, 2), np.float32)
        dst[0] = [18.0, 24.0]
        dst[1] = np.array([18.0, 24.0]) + np.array([0.0, -18.0])
        d = dst[0] - dst[1]
        dst[2] = dst[1] + np.r_[-d[1], d[0]]
        m = cv2.getAffineTransform(src, dst)
        add({"op": "warp", "src": [64, 48], "dst": [36, 48], "center": [cx, cy], "scaleW": sw_,
             "matrix": m.flatten().tolist()},
            cv2.warpAffine(pattern(64, 48), m, (36, 48), flags=cv2.INTER_LINEAR))

    ellipses = []
    for center, axes, angle in [((100, 100), (20, 4), 0), ((50, 60), (13, 4), 37), ((7, 9), (0, 4), -45),
                                ((200, 150), (31, 4), 123), ((10, 10), (2, 1), 90), ((10, 10), (5, 4), 0),
                                ((30, 30), (7, 5), 180)]:
        pts = cv2.ellipse2Poly(center, axes, angle, 0, 360, 1)
        ellipses.append({"center": center, "axes": axes, "angle": angle, "points": pts.tolist()})

    with open(os.path.join(HERE, "opencv_kernels.json"), "w") as fh:
        json.dump({"opencv": cv2.__version__, "cases": cases, "ellipse2Poly": ellipses,
                   "primitives": primitives(blobs_append=add)}, fh, indent=1)
    with gzip.GzipFile(os.path.join(HERE, "opencv_kernels.bin.gz"), "wb", mtime=0) as fh:
        fh.write(b"".join(blobs))


if __name__ == "__main__":
    main()
