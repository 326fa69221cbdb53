"""Hugging Face RobertaForSequenceClassification / BertForSequenceClassification built
from torch's own modules: the reference for maskd's classifier (issue 16).

The encoder is scripts/torch_mlm.py's TorchEncoder (nn.Embedding, nn.LayerNorm,
nn.TransformerEncoderLayer, the `roberta.` / `bert.` state-dict names); the heads are
transformers 4.46's:

  RoBERTa  (no pooler) RobertaClassificationHead on the first token:
           x = h[:, 0]; dropout; classifier.dense (H, H); tanh; dropout;
           classifier.out_proj (num_labels, H)
  BERT     pooler: pooled = tanh(bert.pooler.dense(h[:, 0])); dropout;
           classifier (num_labels, H)

Dropout p = classifier_dropout when config.json sets it, else hidden_dropout_prob.
Loss as HF's problem_type: "single_label_classification" (the default for
num_labels > 1 with integer labels) is CrossEntropyLoss, the mean over rows whose
label is not -100 (ignore_index); "multi_label_classification" BCEWithLogitsLoss on
float (B, num_labels) targets; "regression" (num_labels 1) MSELoss. Weights as HF's
_init_weights: N(0, initializer_range) for Linear and Embedding, zero biases, LayerNorm
1/0, padding rows 0.

Use: import it (scripts/torch_cls_reference.py, scripts/torch_finetune.py), or run
`/usr/bin/python3 scripts/torch_cls.py --selftest`, which checks both classifiers,
in float64, against a hand-written HF-style implementation (torch_mlm.hf_style_encode
and the heads written out from modeling_roberta.py / modeling_bert.py): logits, loss
and every gradient, with padded rows, a -100 row and BERT token types. A comparison
fails when a head differs from HF's (pooler or not, first token, tanh placement,
dropout sites, names) or the loss averages over the wrong rows.
"""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_mlm import IGNORE, MLMConfig, TorchEncoder, _hf_ops, hf_style_encode, linear_schedule  # noqa: E402,F401

PROBLEMS = ("single_label_classification", "multi_label_classification", "regression")


class ClsConfig(MLMConfig):
    """MLMConfig plus a classifier's fields of config.json: num_labels (len(id2label) when
    id2label is given, as PretrainedConfig), id2label / label2id, classifier_dropout
    (None = hidden_dropout_prob), problem_type (None = decided from labels as HF)."""

    def __init__(self, d):
        if isinstance(d, str):
            d = json.loads(d)
        super().__init__(d)
        arch = d.get("architectures") or []
        want = "RobertaForSequenceClassification" if self.model_type == "roberta" else "BertForSequenceClassification"
        if arch and arch[0] != want and not arch[0].endswith("ForMaskedLM"):
            raise ValueError(f"architectures: expected {want} (or a masked LM to start from), got {arch[0]!r}")
        id2label = d.get("id2label")
        if id2label:
            self.num_labels = len(id2label)
            self.id2label = {int(k): v for k, v in id2label.items()}
            if sorted(self.id2label) != list(range(self.num_labels)):
                raise ValueError("id2label: keys must be 0..num_labels-1")
        else:
            self.num_labels = int(d.get("num_labels", 2))
            self.id2label = {i: f"LABEL_{i}" for i in range(self.num_labels)}
        if self.num_labels < 1:
            raise ValueError("num_labels: must be >= 1")
        self.labels = [self.id2label[i] for i in range(self.num_labels)]
        cd = d.get("classifier_dropout")
        self.classifier_dropout = None if cd is None else float(cd)
        self.problem_type = d.get("problem_type")
        if self.problem_type is not None and self.problem_type not in PROBLEMS:
            raise ValueError(f"problem_type: {self.problem_type!r} is not one of {PROBLEMS}")

    @property
    def head_dropout(self):
        return self.hidden_dropout_prob if self.classifier_dropout is None else self.classifier_dropout


def classifier_config(base, labels, problem_type="single_label_classification", classifier_dropout=None):
    """An HF config.json dict of a sequence classifier: base (an MLM's config dict) with
    architectures, id2label {"0": name}, label2id, problem_type and classifier_dropout."""
    d = dict(base)
    d["architectures"] = ["RobertaForSequenceClassification" if d["model_type"] == "roberta"
                          else "BertForSequenceClassification"]
    d["id2label"] = {str(i): n for i, n in enumerate(labels)}
    d["label2id"] = {n: i for i, n in enumerate(labels)}
    d["problem_type"] = problem_type
    d["classifier_dropout"] = classifier_dropout
    return d


class TorchCls(TorchEncoder):
    """RobertaForSequenceClassification / BertForSequenceClassification (see module doc)."""

    def __init__(self, cfg):
        if not isinstance(cfg, ClsConfig):
            cfg = ClsConfig(cfg)
        super().__init__(cfg)
        c = self.cfg
        H, C = c.hidden_size, c.num_labels
        if c.model_type == "roberta":
            self.cls_dense = nn.Linear(H, H)      # classifier.dense
            self.cls_out = nn.Linear(H, C)        # classifier.out_proj
        else:
            self.pooler = nn.Linear(H, H)         # bert.pooler.dense
            self.classifier = nn.Linear(H, C)     # classifier
        self.cls_dropout = nn.Dropout(c.head_dropout)
        self.init_weights()

    def head(self, h):
        """Logits (B, num_labels) from the last hidden states (B, T, H)."""
        x = h[:, 0]
        if self.cfg.model_type == "roberta":
            x = torch.tanh(self.cls_dense(self.cls_dropout(x)))
            return self.cls_out(self.cls_dropout(x))
        return self.classifier(self.cls_dropout(torch.tanh(self.pooler(x))))

    def problem(self, labels):
        c = self.cfg
        if c.problem_type is not None:
            return c.problem_type
        if c.num_labels == 1:
            return "regression"
        return "single_label_classification" if labels.dtype in (torch.long, torch.int) else "multi_label_classification"

    def loss(self, logits, labels):
        p = self.problem(labels)
        if p == "single_label_classification":
            return F.cross_entropy(logits.reshape(-1, self.cfg.num_labels), labels.reshape(-1).long(),
                                   ignore_index=IGNORE)
        if p == "multi_label_classification":
            return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
        return F.mse_loss(logits.squeeze() if self.cfg.num_labels == 1 else logits, labels.to(logits.dtype).squeeze())

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None):
        """Returns (loss or None, logits (B, num_labels))."""
        logits = self.head(self.encode(input_ids, attention_mask, token_type_ids))
        return (None if labels is None else self.loss(logits, labels)), logits

    def hf_tensors(self):
        out = self.encoder_hf_tensors()
        if self.cfg.model_type == "roberta":
            out += [("classifier.dense.weight", self.cls_dense.weight, None),
                    ("classifier.dense.bias", self.cls_dense.bias, None),
                    ("classifier.out_proj.weight", self.cls_out.weight, None),
                    ("classifier.out_proj.bias", self.cls_out.bias, None)]
        else:
            out += [("bert.pooler.dense.weight", self.pooler.weight, None),
                    ("bert.pooler.dense.bias", self.pooler.bias, None),
                    ("classifier.weight", self.classifier.weight, None),
                    ("classifier.bias", self.classifier.bias, None)]
        return out


# ---- self-test against a hand-written HF-style implementation -----------------------------
def hf_style_cls_forward(sd, c, input_ids, attention_mask, token_type_ids, labels):
    """modeling_roberta.RobertaForSequenceClassification / modeling_bert.BertForSequenceClassification
    (dropout 0, single-label) on HF-named tensors. Returns (loss, logits (B, C))."""
    lin, _, _ = _hf_ops(sd, c.layer_norm_eps)
    h = hf_style_encode(sd, c, input_ids, attention_mask, token_type_ids)
    first = h[:, 0, :]
    if c.model_type == "roberta":
        logits = lin(torch.tanh(lin(first, "classifier.dense")), "classifier.out_proj")
    else:
        logits = lin(torch.tanh(lin(first, "bert.pooler.dense")), "classifier")
    loss = torch.nn.CrossEntropyLoss()(logits.view(-1, c.num_labels), labels.view(-1))
    return loss, logits


def _selftest():
    torch.manual_seed(0)
    ok = True
    for mt in ("roberta", "bert"):
        base = dict(model_type=mt, vocab_size=53, hidden_size=24, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=40, max_position_embeddings=30, type_vocab_size=1 if mt == "roberta" else 2,
                    pad_token_id=1 if mt == "roberta" else 0, layer_norm_eps=1e-5 if mt == "roberta" else 1e-12,
                    hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, initializer_range=0.2,
                    hidden_act="gelu")
        cfg = classifier_config(base, ["a", "b", "c", "d"])
        m = TorchCls(cfg).double()
        assert m.cfg.num_labels == 4 and m.cfg.labels == ["a", "b", "c", "d"]
        with torch.no_grad():
            for _, p in m.named_parameters():
                p.add_(0.1 * torch.randn_like(p))
        pad = m.cfg.pad_token_id
        B, T = 4, 9
        ids = torch.randint(3, 53, (B, T))
        am = torch.ones(B, T, dtype=torch.long)
        am[1, 6:] = 0
        am[2, 2:] = 0
        am[3, 4:] = 0
        ids[am == 0] = pad
        ids[0, 3] = pad
        tt = torch.zeros(B, T, dtype=torch.long)
        if mt == "bert":
            tt[0, 5:] = 1
            tt[1, 3:6] = 1
        labels = torch.tensor([2, 0, 3, IGNORE])
        loss, logits = m(ids, am, tt, labels=labels)
        loss.backward()
        g_mod = m.hf_state_dict(grads=True)
        sd = {k: v.clone().requires_grad_(True) for k, v in m.hf_state_dict().items()}
        loss2, logits2 = hf_style_cls_forward(sd, m.cfg, ids, am, tt, labels)
        loss2.backward()
        errs = {"logits": (logits - logits2).abs().max().item(), "loss": abs(loss.item() - loss2.item())}
        for k in sd:
            errs["grad " + k] = (g_mod[k] - sd[k].grad).abs().max().item()
        # The -100 row is skipped: the loss is the mean over the other three.
        l3 = F.cross_entropy(logits[:3], labels[:3]).item()
        errs["ignored row"] = abs(l3 - loss.item())
        # Round trip through HF names.
        m2 = TorchCls(cfg).double()
        m2.load_hf_state_dict(m.hf_state_dict())
        errs["reload"] = (m2(ids, am, tt)[1] - logits).abs().max().item()
        worst = max(errs.items(), key=lambda kv: kv[1])
        heads = [k for k in sd if k.startswith("classifier") or "pooler" in k]
        nonzero = all(sd[k].grad.abs().max().item() > 0 for k in heads)
        good = worst[1] < 1e-10 and nonzero and (("bert.pooler.dense.weight" in sd) == (mt == "bert"))
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} torch_cls {mt}: {len(errs)} comparisons, worst {worst[0]} {worst[1]:.2e}; "
              f"head tensors {heads}")
    # Dropout sites: with p = 1 the dropped input is zero, so a site's presence shows in the logits.
    for mt in ("roberta", "bert"):
        base = dict(model_type=mt, vocab_size=20, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                    intermediate_size=8, max_position_embeddings=16, hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0, hidden_act="gelu")
        m = TorchCls(classifier_config(base, ["x", "y"], classifier_dropout=1.0)).train()
        with torch.no_grad():
            for _, p in m.named_parameters():
                if p.dim() == 1:
                    p.normal_()
        _, lg = m(torch.randint(3, 20, (2, 5)))
        if mt == "roberta":
            want = m.cls_out.bias.expand(2, -1)     # dropout before out_proj zeroes its input
        else:
            want = m.classifier.bias.expand(2, -1)  # dropout after the pooler zeroes the classifier's input
        good = torch.equal(lg, want) and m.cfg.head_dropout == 1.0
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} torch_cls {mt} dropout sites (classifier_dropout overrides hidden_dropout_prob)")
    return ok


if __name__ == "__main__":
    if "--selftest" in sys.argv:
        sys.exit(0 if _selftest() else 1)
    print(__doc__)
