/* libFuzzer harness: run descriptions (engine/train/run_config.h). The input is applied as
** a JSON object (run_config_apply_json, and run_config_load from a file), and read as
** lines "key=value" for run_config_set (the command line's flags). Checks: a refused
** description leaves the RunConfig as it was; the file and text paths agree; and every
** description that was accepted (JSON or flags) is written by run_config_to_json into
** JSON that applies back to the same fields (what the store keeps for a run is what
** resuming it reads), and passes run_config_check the same way. */
#include <stdint.h>
#include <string.h>

#include "engine/train/run_config.h"
#include "tests/fuzz/fuzz_common.h"

#define STR_FIELDS(X) X(name) X(tokenizer) X(train) X(validation) X(config) X(out)
#define NUM_FIELDS(X)                                                                                          \
  X(epochs) X(max_steps) X(batch) X(grad_accum) X(lr) X(weight_decay) X(warmup_steps) X(clip_norm)             \
  X(min_lr_ratio) X(adam_beta1) X(adam_beta2) X(adam_epsilon) X(seed) X(eval_seed) X(threads) X(eval_batches) \
  X(checkpoint_steps) X(checkpoint_epochs) X(keep_last) X(mlm_probability) X(label_smoothing)

/* Field by field: strings up to their NUL (bytes after it are leftovers), numbers bit for bit. */
static const char *differs(const RunConfig *a, const RunConfig *b) {
#define STR(f) if (strcmp(a->f, b->f)) return #f;
#define NUM(f) if (memcmp(&a->f, &b->f, sizeof a->f)) return #f;
  STR_FIELDS(STR)
  NUM_FIELDS(NUM)
#undef STR
#undef NUM
  return NULL;
}

static void check_round_trip(const RunConfig *rc, const char *how) {
  char *json = run_config_to_json(rc);
  FUZZ_CHECK(json, "run_config_to_json failed");
  RunConfig back;
  run_config_defaults(&back);
  Err err = {0};
  FUZZ_CHECK(run_config_apply_json(&back, json, &err) == 0, "%s: the written description is refused: %s\n%s", how, err.msg, json);
  const char *f = differs(rc, &back);
  FUZZ_CHECK(!f, "%s: field %s changed when written and read back\n%s", how, f, json);
  Err e1 = {0}, e2 = {0};
  FUZZ_CHECK(run_config_check(rc, &e1) == run_config_check(&back, &e2), "%s: run_config_check differs after the round trip", how);
  free(json);
}

/* The input as flags: each line "key=value" (a line without '=' is a key without value). */
static void apply_lines(RunConfig *rc, const uint8_t *data, size_t size) {
  char *text = fuzz_cstr(data, size);
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    char *eq = strchr(line, '=');
    if (eq) *eq = 0;
    Err err = {0};
    RunConfig before = *rc;
    if (run_config_set(rc, line, eq ? eq + 1 : NULL, &err)) {
      FUZZ_CHECK(err.msg[0], "a refused flag without a message");
      FUZZ_CHECK(!differs(&before, rc), "a refused flag changed the description");
    } else {
      FUZZ_CHECK(run_config_has_key(line), "run_config_set took \"%s\", which run_config_has_key does not know", line);
    }
  }
  free(text);
}

/* Seeds: run_config_to_json of a typical run, and the same run as flags. */
static void write_seeds(const char *dir) {
  RunConfig rc;
  run_config_defaults(&rc);
  Err err = {0};
  const char *flags[][2] = {{"name", "wiki-small"}, {"tokenizer", "tok/tokenizer.json"}, {"train", "data/train"},
                            {"validation", "data/valid"}, {"--lr", "0.0003"}, {"grad-accum", "2"}, {"seed", "7"},
                            {"epochs", "3"}, {"mlm_probability", "0.2"}};
  char lines[1024] = "";
  for (size_t i = 0; i < sizeof flags / sizeof *flags; i++) {
    FUZZ_CHECK(run_config_set(&rc, flags[i][0], flags[i][1], &err) == 0, "%s", err.msg);
    snprintf(lines + strlen(lines), sizeof lines - strlen(lines), "%s=%s\n", flags[i][0], flags[i][1]);
  }
  char *json = run_config_to_json(&rc);
  fuzz_write_file(fuzz_seed_path(dir, "run.json"), json, strlen(json));
  free(json);
  fuzz_write_file(fuzz_seed_path(dir, "run.flags"), lines, strlen(lines));
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc; (void)argv;
  fuzz_seeds_then_exit(write_seeds);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  RunConfig def, rc, frc;
  run_config_defaults(&def);
  rc = def;
  frc = def;
  char *text = fuzz_cstr(data, size);
  Err err = {0}, ferr = {0};
  int r = run_config_apply_json(&rc, text, &err);
  int fr = run_config_load(&frc, fuzz_memfd_path(data, size), &ferr);
  if (strlen(text) == size && size <= (1u << 20)) {
    FUZZ_CHECK(r == fr, "text %s, file %s", r ? err.msg : "accepted", fr ? ferr.msg : "accepted");
    FUZZ_CHECK(!differs(&rc, &frc), "text and file give different descriptions");
  }
  free(text);
  if (r) {
    FUZZ_CHECK(err.msg[0], "a refusal without a message");
    FUZZ_CHECK(!differs(&def, &rc), "a refused description changed the RunConfig");
  } else {
    check_round_trip(&rc, "json");
  }

  RunConfig flags = def;
  apply_lines(&flags, data, size);
  check_round_trip(&flags, "flags");
  return 0;
}
