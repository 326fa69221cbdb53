/* The generated tables behind engine/tok/unicode.h (unicode_tables.c, written by
** scripts/gen-unicode-tables); only unicode.c reads them. */
#ifndef MASKD_UNICODE_TABLES_H
#define MASKD_UNICODE_TABLES_H
#include <stddef.h>
#include <stdint.h>

extern const uint32_t uni_white_space_ranges[][2], uni_letter_ranges[][2], uni_number_ranges[][2],
    uni_punctuation_ranges[][2], uni_mark_nonspacing_ranges[][2], uni_other_ranges[][2], uni_word_ranges[][2];
extern const size_t uni_white_space_count, uni_letter_count, uni_number_count, uni_punctuation_count,
    uni_mark_nonspacing_count, uni_other_count, uni_word_count;
extern const uint32_t uni_combining_runs[][3];
extern const size_t uni_combining_count;
extern const uint32_t uni_nfd_map[][5];
extern const size_t uni_nfd_count;
extern const uint32_t uni_lower_map[][4];
extern const size_t uni_lower_count;

#endif
