/* A Unigram vocabulary's scores as HF tokenizers reads them from tokenizer.json.
**
** tokenizers parses JSON with serde_json built without its float_roundtrip feature,
** whose number reading is fast and inexact: the decimal digits (at most 19 or 20 of
** them, the rest dropped) become a u64 significand, the u64 is rounded to a double,
** and that double is multiplied or divided once by a power of ten. For a score with
** 16 or 17 significant digits (what shortest round-trip printing, maskd's and HF's
** own, writes) the result is often one unit in the last place away from the correctly
** rounded value that jansson's strtod gives, and Viterbi's near-ties then pick other
** pieces ("XIII" as X II I against HF's X I II). maskd reads the scores' own text the
** way serde_json does, so every tokenizer.json gives HF's pieces, and writes that text
** back as it was: a double printed again and read by serde_json may move by that unit,
** so printing would not give back the bytes it read (HF's own re-save does not). */
#ifndef MASKD_VOCAB_SCORES_H
#define MASKD_VOCAB_SCORES_H
#include <stddef.h>

/* serde_json's value (no float_roundtrip) of the JSON number text num[0..len), which
** must be a valid JSON number; an integer is converted as Rust's `as f64` does. Sets
** *out_of_range (serde_json refuses the number) when it overflows to infinity. */
double vocab_scores_serde_f64(const char *num, size_t len, int *out_of_range);

/* Reads the n scores of the Unigram vocabulary in the JSON text json[0..len) (the
** second element of each entry of the top-level "model" object's "vocab" list; the
** last of a repeated key, as jansson keeps it) into scores[0..n), each as
** vocab_scores_serde_f64 reads it, and where each one's text is into spans[2i] (its
** offset in json) and spans[2i + 1] (its length), unless spans is NULL. The text must
** be what jansson has already parsed into such a vocabulary of n entries. Returns 0,
** or -1 if the text does not hold exactly n [piece, number] entries there, or a score
** is out of range. */
int vocab_scores_read(const char *json, size_t len, double *scores, size_t *spans, size_t n);

#endif
