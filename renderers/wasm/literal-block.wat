;; The body of a YAML literal block, checked and indented in one pass, 16 bytes at a time (SIMD).
;; Source of renderers/wasm/literal-block-bytes.ts (npm run gen:wasm); used by literal-block.ts,
;; whose JavaScript reference (isReadableText + literalBlock) it must agree with.
;;
;; Memory (64 KiB to start, grown by the caller): byte 15 is always 0 (the "byte before the
;; first"), the text is at 16 (at most 4096 bytes, plus 16 bytes of slack the 16-byte loads may
;; read past its end), and from 8192 on is the caller's: the renderers build their whole output
;; there (the ByteBuilder's scratch), so the body is written where it belongs in the output, at
;; $out (at most n + pad * (n / 2 + 1) bytes, plus 16 of slack the 16-byte stores may write past
;; its end: the caller makes room for both).
;;
;; indent(n, pad, out) copies the n bytes to out, with pad spaces before every line that is not
;; empty, and returns the length written; or -1 when the text is not readable (a C0 control but
;; tab and LF, DEL, or a line ending in a space or tab); or -2 when it holds a byte from 0x80 up,
;; whose UTF-8 and characters the caller checks the long way. pad is at most 16.
;;
;; block(n, pad, out, src, len) first copies len bytes of markup from src to out (the key and the
;; block's header, staged by the caller earlier in the scratch: src + len + 16 <= out, so the
;; 16-byte copy never reads what it writes), then does indent(n, pad, out + len); it returns the
;; length of both, or indent's -1 / -2 (the bytes from out on are then garbage).
(module
  (memory (export "memory") 1)
  (func (export "block") (param $n i32) (param $pad i32) (param $out i32) (param $src i32) (param $len i32) (result i32)
    (local $k i32)
    (local $r i32)
    (block $copied
      (loop $copy
        (br_if $copied (i32.ge_u (local.get $k) (local.get $len)))
        (v128.store (i32.add (local.get $out) (local.get $k)) (v128.load (i32.add (local.get $src) (local.get $k))))
        (local.set $k (i32.add (local.get $k) (i32.const 16)))
        (br $copy)))
    (local.set $r (call $indent (local.get $n) (local.get $pad) (i32.add (local.get $out) (local.get $len))))
    (if (result i32) (i32.lt_s (local.get $r) (i32.const 0))
      (then (local.get $r))
      (else (i32.add (local.get $r) (local.get $len)))))
  (func $indent (export "indent") (param $n i32) (param $pad i32) (param $out i32) (result i32)
    (local $i i32)
    (local $o i32)
    (local $end i32)
    (local $rem i32)
    (local $mask i32)
    (local $lf i32)
    (local $c i32)
    (local $np i32)
    (local $v v128)
    (local $isLf v128)
    (local $prev v128)
    (local.set $end (i32.add (i32.const 16) (local.get $n)))
    ;; the last line must not end in a space or tab either
    (local.set $c (i32.load8_u (i32.sub (local.get $end) (i32.const 1))))
    (if (i32.or (i32.eq (local.get $c) (i32.const 0x20)) (i32.eq (local.get $c) (i32.const 0x09)))
      (then (return (i32.const -1))))
    (local.set $i (i32.const 16))
    (local.set $o (local.get $out))
    (block $done
      (loop $line
        (br_if $done (i32.ge_u (local.get $i) (local.get $end)))
        ;; an empty line stays empty (no trailing spaces); any other is indented
        (if (i32.ne (i32.load8_u (local.get $i)) (i32.const 0x0a))
          (then
            (v128.store (local.get $o) (v128.const i8x16 32 32 32 32 32 32 32 32 32 32 32 32 32 32 32 32))
            (local.set $o (i32.add (local.get $o) (local.get $pad)))))
        ;; copy 16 bytes at a time (the store is undone by the next one where the line ends
        ;; sooner), checking them, until the line's LF or the end of the text
        (loop $scan
          (local.set $v (v128.load (local.get $i)))
          (v128.store (local.get $o) (local.get $v))
          ;; the bytes that are not printable ASCII (0x20 to 0x7e: v + 0x60 is then, as a signed
          ;; byte, from -128 to -34)
          (local.set $np (i8x16.bitmask
            (i8x16.gt_s
              (i8x16.add (local.get $v) (v128.const i8x16 0x60 0x60 0x60 0x60 0x60 0x60 0x60 0x60 0x60 0x60 0x60 0x60 0x60 0x60 0x60 0x60))
              (v128.const i8x16 -34 -34 -34 -34 -34 -34 -34 -34 -34 -34 -34 -34 -34 -34 -34 -34))))
          ;; the usual 16 bytes: all printable, none at or past the end of the text
          (if (i32.and
                (i32.le_u (i32.add (local.get $i) (i32.const 16)) (local.get $end))
                (i32.eqz (local.get $np)))
            (then
              (local.set $i (i32.add (local.get $i) (i32.const 16)))
              (local.set $o (i32.add (local.get $o) (i32.const 16)))
              (br $scan)))
          ;; otherwise: an LF, a tab, the end of the text, or something to refuse or leave alone
          (local.set $prev (v128.load (i32.sub (local.get $i) (i32.const 1))))
          (local.set $rem (i32.sub (local.get $end) (local.get $i)))
          ;; the lanes that hold the text (all but at its end)
          (local.set $mask
            (if (result i32) (i32.ge_u (local.get $rem) (i32.const 16))
              (then (i32.const 0xffff))
              (else (i32.sub (i32.shl (i32.const 1) (local.get $rem)) (i32.const 1)))))
          (local.set $isLf (i8x16.eq (local.get $v) (v128.const i8x16 10 10 10 10 10 10 10 10 10 10 10 10 10 10 10 10)))
          (local.set $lf (i32.and (local.get $mask) (i8x16.bitmask (local.get $isLf))))
          (local.set $np (i32.and (local.get $mask) (local.get $np)))
          ;; the usual case: nothing but LFs among them, and no space or tab before an LF
          (if (i32.eq (local.get $np) (local.get $lf))
            (then
              (if (i32.and (local.get $lf)
                    (i8x16.bitmask
                      (v128.or
                        (i8x16.eq (local.get $prev) (v128.const i8x16 32 32 32 32 32 32 32 32 32 32 32 32 32 32 32 32))
                        (i8x16.eq (local.get $prev) (v128.const i8x16 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9)))))
                (then (return (i32.const -1)))))
            (else
            ;; a control byte but tab and LF, DEL, an LF after a space or tab
            (if (i32.and (local.get $mask)
                  (i8x16.bitmask
                    (v128.or
                      (v128.or
                        (v128.andnot
                          (i8x16.lt_u (local.get $v) (v128.const i8x16 32 32 32 32 32 32 32 32 32 32 32 32 32 32 32 32))
                          (v128.or
                            (i8x16.eq (local.get $v) (v128.const i8x16 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9))
                            (local.get $isLf)))
                        (i8x16.eq (local.get $v) (v128.const i8x16 127 127 127 127 127 127 127 127 127 127 127 127 127 127 127 127)))
                      (v128.and
                        (local.get $isLf)
                        (v128.or
                          (i8x16.eq (local.get $prev) (v128.const i8x16 32 32 32 32 32 32 32 32 32 32 32 32 32 32 32 32))
                          (i8x16.eq (local.get $prev) (v128.const i8x16 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9 9)))))))
              (then (return (i32.const -1))))
            ;; a byte from 0x80 up: left to the caller
            (if (i32.and (local.get $mask) (i8x16.bitmask (local.get $v)))
              (then (return (i32.const -2))))))
          (if (i32.eqz (local.get $lf))
            (then
              (if (i32.le_u (local.get $rem) (i32.const 16))
                (then
                  (local.set $o (i32.add (local.get $o) (local.get $rem)))
                  (br $done)))
              (local.set $i (i32.add (local.get $i) (i32.const 16)))
              (local.set $o (i32.add (local.get $o) (i32.const 16)))
              (br $scan)))
          ;; up to and with the LF; the next line starts after it
          (local.set $c (i32.add (i32.ctz (local.get $lf)) (i32.const 1)))
          (local.set $i (i32.add (local.get $i) (local.get $c)))
          (local.set $o (i32.add (local.get $o) (local.get $c)))
          (br $line))))
    (i32.sub (local.get $o) (local.get $out))))
