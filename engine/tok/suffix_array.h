/* Suffix array, LCP array and the internal nodes of the suffix tree over an
** integer text: the "frequent substrings" that seed Unigram training, with the
** node semantics of esaxx (which SentencePiece and HF tokenizers use): a node is
** an LCP interval [left, right) of at least two suffixes sharing `depth` symbols. */
#ifndef MASKD_SUFFIX_ARRAY_H
#define MASKD_SUFFIX_ARRAY_H
#include <stddef.h>
#include <stdint.h>
#include "engine/core/err.h"

typedef struct SaNode { int32_t left, right, depth; } SaNode;

/* Suffix array of t[0..n): sa[i] = start of the i-th smallest suffix; symbols in
** [0, k). Prefix doubling with radix sorts, O(n log n). Returns 0 or -1. */
int sa_build(const int32_t *t, int32_t n, int32_t k, int32_t *sa, Err *err);

/* LCP array (Kasai): lcp[i] = common prefix length of suffixes sa[i-1] and sa[i];
** lcp[0] = 0. Returns 0 or -1 (out of memory). */
int sa_lcp(const int32_t *t, const int32_t *sa, int32_t n, int32_t *lcp, Err *err);

/* Internal nodes of the suffix tree: every LCP interval with right - left >= 2, in
** the order esaxx emits them (bottom-up). *out is malloc'd; returns the count or -1. */
int64_t sa_nodes(const int32_t *sa, const int32_t *lcp, int32_t n, SaNode **out, Err *err);

#endif
