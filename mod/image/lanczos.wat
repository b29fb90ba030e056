;; The two passes of PIL's 8-bit resampling (Pillow src/libImaging/Resample.c,
;; ImagingResampleHorizontal_8bpc / ImagingResampleVertical_8bpc) as WebAssembly
;; with 128-bit SIMD, for lanczos.ts. Same integer arithmetic as the C code:
;; each sample is (2^21 + sum(pixel * weight)) >> 22, clipped to 0..255, where the
;; weights are 22-bit fixed point; every sum stays inside int32 as in C.
;;
;; Build: bash mod/image/make_lanczos_wasm.sh (Debian `wabt`), which embeds the
;; binary in lanczos_wasm.ts.
;;
;; Tap tables (made in lanczos.ts): for output index i, `first` (i32) is the first
;; input index, `count` (i32) the number of inputs, and `weights` holds `stride`
;; i32 weights per output index.
;;
;; Reads may run up to 16 bytes past the last input sample and writes up to 16
;; bytes past the last output sample; the caller leaves that much slack after
;; every region.
(module
  (memory (import "env" "memory") 1)

  ;; Horizontal pass, 3 interleaved channels: `rows` rows of `inW` pixels at
  ;; `src` become rows of `outW` pixels at `dst`.
  (func (export "horizontal3")
    (param $src i32) (param $inW i32) (param $rows i32) (param $dst i32) (param $outW i32)
    (param $first i32) (param $count i32) (param $weights i32) (param $stride i32)
    (local $y i32) (local $xx i32) (local $row i32) (local $p i32) (local $w i32)
    (local $end i32) (local $acc v128) (local $inRow i32) (local $wStep i32)
    (local.set $inRow (i32.mul (local.get $inW) (i32.const 3)))
    (local.set $wStep (i32.shl (local.get $stride) (i32.const 2)))
    (block $rowsDone
      (br_if $rowsDone (i32.eqz (local.get $rows)))
      (loop $rowLoop
        (local.set $row (i32.add (local.get $src) (i32.mul (local.get $y) (local.get $inRow))))
        (local.set $xx (i32.const 0))
        (loop $pixelLoop
          (local.set $p (i32.add (local.get $row)
            (i32.mul (i32.load (i32.add (local.get $first) (i32.shl (local.get $xx) (i32.const 2))))
              (i32.const 3))))
          (local.set $w (i32.add (local.get $weights) (i32.mul (local.get $xx) (local.get $wStep))))
          (local.set $end (i32.add (local.get $w)
            (i32.shl (i32.load (i32.add (local.get $count) (i32.shl (local.get $xx) (i32.const 2))))
              (i32.const 2))))
          (local.set $acc (i32x4.splat (i32.const 0x200000)))
          (block $tapsDone
            (br_if $tapsDone (i32.ge_u (local.get $w) (local.get $end)))
            (loop $tapLoop
              ;; lanes r, g, b (and the next pixel's r, unused) times the weight
              (local.set $acc (i32x4.add (local.get $acc)
                (i32x4.mul
                  (i32x4.extend_low_i16x8_u (v128.load8x8_u (local.get $p)))
                  (v128.load32_splat (local.get $w)))))
              (local.set $p (i32.add (local.get $p) (i32.const 3)))
              (local.set $w (i32.add (local.get $w) (i32.const 4)))
              (br_if $tapLoop (i32.lt_u (local.get $w) (local.get $end)))))
          ;; >> 22, then saturating narrows i32 -> i16 -> u8 are the clip to 0..255;
          ;; four bytes are stored, the fourth is overwritten by the next pixel.
          (local.set $acc (i32x4.shr_s (local.get $acc) (i32.const 22)))
          (local.set $acc (i16x8.narrow_i32x4_s (local.get $acc) (local.get $acc)))
          (v128.store32_lane 0 (local.get $dst)
            (i8x16.narrow_i16x8_u (local.get $acc) (local.get $acc)))
          (local.set $dst (i32.add (local.get $dst) (i32.const 3)))
          (local.set $xx (i32.add (local.get $xx) (i32.const 1)))
          (br_if $pixelLoop (i32.lt_u (local.get $xx) (local.get $outW))))
        (local.set $y (i32.add (local.get $y) (i32.const 1)))
        (br_if $rowLoop (i32.lt_u (local.get $y) (local.get $rows))))))

  ;; Horizontal pass, 1 channel (scalar: grey images are not on the hot path).
  (func (export "horizontal1")
    (param $src i32) (param $inW i32) (param $rows i32) (param $dst i32) (param $outW i32)
    (param $first i32) (param $count i32) (param $weights i32) (param $stride i32)
    (local $y i32) (local $xx i32) (local $row i32) (local $p i32) (local $w i32)
    (local $end i32) (local $s i32) (local $wStep i32)
    (local.set $wStep (i32.shl (local.get $stride) (i32.const 2)))
    (block $rowsDone
      (br_if $rowsDone (i32.eqz (local.get $rows)))
      (loop $rowLoop
        (local.set $row (i32.add (local.get $src) (i32.mul (local.get $y) (local.get $inW))))
        (local.set $xx (i32.const 0))
        (loop $pixelLoop
          (local.set $p (i32.add (local.get $row)
            (i32.load (i32.add (local.get $first) (i32.shl (local.get $xx) (i32.const 2))))))
          (local.set $w (i32.add (local.get $weights) (i32.mul (local.get $xx) (local.get $wStep))))
          (local.set $end (i32.add (local.get $w)
            (i32.shl (i32.load (i32.add (local.get $count) (i32.shl (local.get $xx) (i32.const 2))))
              (i32.const 2))))
          (local.set $s (i32.const 0x200000))
          (block $tapsDone
            (br_if $tapsDone (i32.ge_u (local.get $w) (local.get $end)))
            (loop $tapLoop
              (local.set $s (i32.add (local.get $s)
                (i32.mul (i32.load8_u (local.get $p)) (i32.load (local.get $w)))))
              (local.set $p (i32.add (local.get $p) (i32.const 1)))
              (local.set $w (i32.add (local.get $w) (i32.const 4)))
              (br_if $tapLoop (i32.lt_u (local.get $w) (local.get $end)))))
          (local.set $s (i32.shr_s (local.get $s) (i32.const 22)))
          (i32.store8 (local.get $dst)
            (select (i32.const 0)
              (select (i32.const 255) (local.get $s) (i32.gt_s (local.get $s) (i32.const 255)))
              (i32.lt_s (local.get $s) (i32.const 0))))
          (local.set $dst (i32.add (local.get $dst) (i32.const 1)))
          (local.set $xx (i32.add (local.get $xx) (i32.const 1)))
          (br_if $pixelLoop (i32.lt_u (local.get $xx) (local.get $outW))))
        (local.set $y (i32.add (local.get $y) (i32.const 1)))
        (br_if $rowLoop (i32.lt_u (local.get $y) (local.get $rows))))))

  ;; Vertical pass over rows of `rowLen` bytes (any channel count): output row
  ;; yy at `dst` combines the rows first[yy] - row0 ... of `src`, 16 bytes at a time.
  (func (export "vertical")
    (param $src i32) (param $rowLen i32) (param $row0 i32) (param $dst i32) (param $outH i32)
    (param $first i32) (param $count i32) (param $weights i32) (param $stride i32)
    (local $yy i32) (local $x i32) (local $base i32) (local $p i32) (local $w i32)
    (local $wRow i32) (local $end i32) (local $v v128) (local $lo v128) (local $hi v128)
    (local $k v128) (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)
    (local $wStep i32)
    (local.set $wStep (i32.shl (local.get $stride) (i32.const 2)))
    (block $rowsDone
      (br_if $rowsDone (i32.eqz (local.get $outH)))
      (loop $rowLoop
        (local.set $base (i32.add (local.get $src)
          (i32.mul
            (i32.sub (i32.load (i32.add (local.get $first) (i32.shl (local.get $yy) (i32.const 2))))
              (local.get $row0))
            (local.get $rowLen))))
        (local.set $wRow (i32.add (local.get $weights) (i32.mul (local.get $yy) (local.get $wStep))))
        (local.set $end (i32.add (local.get $wRow)
          (i32.shl (i32.load (i32.add (local.get $count) (i32.shl (local.get $yy) (i32.const 2))))
            (i32.const 2))))
        (local.set $x (i32.const 0))
        (loop $chunkLoop
          (local.set $a0 (i32x4.splat (i32.const 0x200000)))
          (local.set $a1 (local.get $a0))
          (local.set $a2 (local.get $a0))
          (local.set $a3 (local.get $a0))
          (local.set $p (i32.add (local.get $base) (local.get $x)))
          (local.set $w (local.get $wRow))
          (block $tapsDone
            (br_if $tapsDone (i32.ge_u (local.get $w) (local.get $end)))
            (loop $tapLoop
              (local.set $v (v128.load (local.get $p)))
              (local.set $lo (i16x8.extend_low_i8x16_u (local.get $v)))
              (local.set $hi (i16x8.extend_high_i8x16_u (local.get $v)))
              (local.set $k (v128.load32_splat (local.get $w)))
              (local.set $a0 (i32x4.add (local.get $a0)
                (i32x4.mul (i32x4.extend_low_i16x8_u (local.get $lo)) (local.get $k))))
              (local.set $a1 (i32x4.add (local.get $a1)
                (i32x4.mul (i32x4.extend_high_i16x8_u (local.get $lo)) (local.get $k))))
              (local.set $a2 (i32x4.add (local.get $a2)
                (i32x4.mul (i32x4.extend_low_i16x8_u (local.get $hi)) (local.get $k))))
              (local.set $a3 (i32x4.add (local.get $a3)
                (i32x4.mul (i32x4.extend_high_i16x8_u (local.get $hi)) (local.get $k))))
              (local.set $p (i32.add (local.get $p) (local.get $rowLen)))
              (local.set $w (i32.add (local.get $w) (i32.const 4)))
              (br_if $tapLoop (i32.lt_u (local.get $w) (local.get $end)))))
          (v128.store (i32.add (local.get $dst) (local.get $x))
            (i8x16.narrow_i16x8_u
              (i16x8.narrow_i32x4_s
                (i32x4.shr_s (local.get $a0) (i32.const 22))
                (i32x4.shr_s (local.get $a1) (i32.const 22)))
              (i16x8.narrow_i32x4_s
                (i32x4.shr_s (local.get $a2) (i32.const 22))
                (i32x4.shr_s (local.get $a3) (i32.const 22)))))
          (local.set $x (i32.add (local.get $x) (i32.const 16)))
          (br_if $chunkLoop (i32.lt_u (local.get $x) (local.get $rowLen))))
        (local.set $dst (i32.add (local.get $dst) (local.get $rowLen)))
        (local.set $yy (i32.add (local.get $yy) (i32.const 1)))
        (br_if $rowLoop (i32.lt_u (local.get $yy) (local.get $outH))))))
)
