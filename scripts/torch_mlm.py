"""A Hugging Face RobertaForMaskedLM / BertForMaskedLM built from torch's own modules.

The independent reference for maskd's engine: nn.Embedding, nn.LayerNorm,
nn.TransformerEncoderLayer (post-LN, exact GELU, batch_first) and nn.Linear,
loaded from and exported to HF state-dict names, so that the numbers can be
compared with the C model tensor by tensor. Run with Debian's torch
(/usr/bin/python3). Import it (scripts/torch_reference.py, scripts/bench-train)
or run it: `python3 scripts/torch_mlm.py --selftest` checks it against a
hand-written HF-style implementation. TorchEncoder (embeddings and layers, the
`roberta.` / `bert.` tensors) is shared with scripts/torch_cls.py's sequence
classifiers; TorchMLM adds the masked-LM head.

Differences from transformers that do not change the numbers with dropout 0:
nn.TransformerEncoderLayer has one more dropout (between GELU and the output
dense) than BertLayer; MultiheadAttention scales q before q.k instead of the
product after; a bool key-padding mask is -inf where HF adds finfo.min (equal
after exp unless a row has no real token, which HF turns into a uniform
average and torch into NaN: do not feed all-padding rows).
"""
import json
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

IGNORE = -100


class MLMConfig:
    """The fields of an HF config.json that change the numbers."""

    def __init__(self, d):
        if isinstance(d, str):
            d = json.loads(d)
        mt = d.get("model_type")
        if mt not in ("roberta", "bert"):
            raise ValueError(f"model_type: expected roberta or bert, got {mt!r}")
        if d.get("hidden_act", "gelu") != "gelu":
            raise ValueError(f"hidden_act: only exact 'gelu' is supported, got {d.get('hidden_act')!r}")
        self.model_type = mt
        self.vocab_size = int(d["vocab_size"])
        self.hidden_size = int(d["hidden_size"])
        self.num_hidden_layers = int(d["num_hidden_layers"])
        self.num_attention_heads = int(d["num_attention_heads"])
        self.intermediate_size = int(d["intermediate_size"])
        self.max_position_embeddings = int(d["max_position_embeddings"])
        self.type_vocab_size = int(d.get("type_vocab_size", 1 if mt == "roberta" else 2))
        self.pad_token_id = int(d.get("pad_token_id", 1 if mt == "roberta" else 0))
        self.layer_norm_eps = float(d.get("layer_norm_eps", 1e-5 if mt == "roberta" else 1e-12))
        self.hidden_dropout_prob = float(d.get("hidden_dropout_prob", 0.1))
        self.attention_probs_dropout_prob = float(d.get("attention_probs_dropout_prob", 0.1))
        self.initializer_range = float(d.get("initializer_range", 0.02))
        if self.hidden_size % self.num_attention_heads:
            raise ValueError("num_attention_heads: hidden_size is not divisible by it")


# Presets of the benchmark (same sizes as maskd's config_preset).
PRESETS = {
    "tiny": dict(vocab_size=8000, hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512),
    "small": dict(vocab_size=8000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
    "base": dict(vocab_size=32000, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
}


def preset_config(name, model_type="roberta", **over):
    d = dict(model_type=model_type, max_position_embeddings=514 if model_type == "roberta" else 512,
             type_vocab_size=1 if model_type == "roberta" else 2,
             pad_token_id=3 if model_type == "roberta" else 0,  # maskd presets: pad 3 (our tokenizer)
             layer_norm_eps=1e-5 if model_type == "roberta" else 1e-12,
             hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, initializer_range=0.02,
             hidden_act="gelu")
    d.update(PRESETS[name])
    d.update(over)
    return d


class TorchEncoder(nn.Module):
    """The encoder that HF's masked-LM and classifier models share (embeddings and
    post-LN layers, the `roberta.` / `bert.` part of the state dict). Subclasses add
    their head, then call init_weights()."""

    def __init__(self, cfg):
        super().__init__()
        if not isinstance(cfg, MLMConfig):
            cfg = MLMConfig(cfg)
        self.cfg = c = cfg
        H = c.hidden_size
        pad = c.pad_token_id
        # padding_idx as HF: the row gets no gradient from the lookup (only from the tied decoder).
        self.word_embeddings = nn.Embedding(c.vocab_size, H, padding_idx=pad)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, H,
                                                padding_idx=pad if c.model_type == "roberta" else None)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, H)
        self.emb_norm = nn.LayerNorm(H, eps=c.layer_norm_eps)
        self.emb_dropout = nn.Dropout(c.hidden_dropout_prob)
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(d_model=H, nhead=c.num_attention_heads, dim_feedforward=c.intermediate_size,
                                       dropout=c.hidden_dropout_prob, activation="gelu",
                                       layer_norm_eps=c.layer_norm_eps, batch_first=True, norm_first=False)
            for _ in range(c.num_hidden_layers)])
        for layer in self.layers:
            # HF has separate attention-probability and hidden dropouts.
            layer.self_attn.dropout = c.attention_probs_dropout_prob

    # HF _init_weights: N(0, initializer_range) for Linear and Embedding, zero biases, LN 1/0, pad rows 0.
    @torch.no_grad()
    def init_weights(self, generator=None):
        r = self.cfg.initializer_range
        for mod in self.modules():
            if isinstance(mod, (nn.Linear, nn.Embedding)):
                mod.weight.normal_(0.0, r, generator=generator)
                if isinstance(mod, nn.Embedding) and mod.padding_idx is not None:
                    mod.weight[mod.padding_idx].zero_()
                if isinstance(mod, nn.Linear) and mod.bias is not None:
                    mod.bias.zero_()
            elif isinstance(mod, nn.LayerNorm):
                mod.weight.fill_(1.0)
                mod.bias.zero_()
            elif isinstance(mod, nn.MultiheadAttention):
                mod.in_proj_weight.normal_(0.0, r, generator=generator)
                mod.in_proj_bias.zero_()

    def position_ids(self, input_ids):
        c = self.cfg
        T = input_ids.shape[1]
        if c.model_type == "roberta":
            mask = (input_ids != c.pad_token_id).long()
            return torch.cumsum(mask, dim=1) * mask + c.pad_token_id
        return torch.arange(T, device=input_ids.device).unsqueeze(0).expand_as(input_ids)

    def encode(self, input_ids, attention_mask=None, token_type_ids=None):
        """Hidden states (B, T, H) after the last encoder layer."""
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = (self.word_embeddings(input_ids) + self.position_embeddings(self.position_ids(input_ids))
             + self.token_type_embeddings(token_type_ids))
        x = self.emb_dropout(self.emb_norm(x))
        kpm = None if attention_mask is None else (attention_mask == 0)
        for layer in self.layers:
            x = layer(x, src_key_padding_mask=kpm)
        return x

    # ---- HF state-dict names ------------------------------------------------------------
    def prefix(self):
        return "roberta" if self.cfg.model_type == "roberta" else "bert"

    def encoder_hf_tensors(self):
        """[(hf_name, parameter, rows or None)] of the embeddings and layers, HF order."""
        out = []
        H = self.cfg.hidden_size
        pre = self.prefix()

        def add(name, param, rows=None):
            out.append((name, param, rows))

        add(f"{pre}.embeddings.word_embeddings.weight", self.word_embeddings.weight)
        add(f"{pre}.embeddings.position_embeddings.weight", self.position_embeddings.weight)
        add(f"{pre}.embeddings.token_type_embeddings.weight", self.token_type_embeddings.weight)
        add(f"{pre}.embeddings.LayerNorm.weight", self.emb_norm.weight)
        add(f"{pre}.embeddings.LayerNorm.bias", self.emb_norm.bias)
        for i, L in enumerate(self.layers):
            p = f"{pre}.encoder.layer.{i}"
            for j, qkv in enumerate(("query", "key", "value")):
                add(f"{p}.attention.self.{qkv}.weight", L.self_attn.in_proj_weight, (j * H, (j + 1) * H))
                add(f"{p}.attention.self.{qkv}.bias", L.self_attn.in_proj_bias, (j * H, (j + 1) * H))
            add(f"{p}.attention.output.dense.weight", L.self_attn.out_proj.weight)
            add(f"{p}.attention.output.dense.bias", L.self_attn.out_proj.bias)
            add(f"{p}.attention.output.LayerNorm.weight", L.norm1.weight)
            add(f"{p}.attention.output.LayerNorm.bias", L.norm1.bias)
            add(f"{p}.intermediate.dense.weight", L.linear1.weight)
            add(f"{p}.intermediate.dense.bias", L.linear1.bias)
            add(f"{p}.output.dense.weight", L.linear2.weight)
            add(f"{p}.output.dense.bias", L.linear2.bias)
            add(f"{p}.output.LayerNorm.weight", L.norm2.weight)
            add(f"{p}.output.LayerNorm.bias", L.norm2.bias)
        return out

    def hf_tensors(self):
        """[(hf_name, tensor_view)] in HF state-dict order; views share storage with the
        parameters (q/k/v are row blocks of in_proj_weight), so .grad can be sliced alike.
        Subclasses append their head's."""
        return self.encoder_hf_tensors()

    def hf_names(self):
        return [n for n, _, _ in self.hf_tensors()]

    def hf_state_dict(self, grads=False):
        """{hf_name: tensor copy}; grads=True gives the gradients under the same names
        (the word-embedding gradient includes the tied decoder's)."""
        sd = {}
        for name, p, rows in self.hf_tensors():
            t = p.grad if grads else p.detach()
            if t is None:
                t = torch.zeros_like(p)
            if rows is not None:
                t = t[rows[0]:rows[1]]
            sd[name] = t.detach().clone().contiguous()
        return sd

    def ignorable_hf_names(self, sd):
        """Names in a state dict that load_hf_state_dict may skip (after checking them)."""
        return ()

    @torch.no_grad()
    def load_hf_state_dict(self, sd, strict=True):
        """Copies HF-named tensors in. Ignores position_ids / token_type_ids buffers and
        what ignorable_hf_names() names."""
        seen = set()
        for name, p, rows in self.hf_tensors():
            if name not in sd:
                if strict:
                    raise KeyError(f"missing tensor {name}")
                continue
            src = torch.as_tensor(sd[name], dtype=p.dtype)
            dst = p if rows is None else p[rows[0]:rows[1]]
            if tuple(src.shape) != tuple(dst.shape):
                raise ValueError(f"{name}: shape {tuple(src.shape)}, expected {tuple(dst.shape)}")
            dst.copy_(src)
            seen.add(name)
        ignorable = self.ignorable_hf_names(sd)
        if strict:
            extra = [k for k in sd if k not in seen and k not in ignorable and not k.endswith("position_ids")
                     and not k.endswith("embeddings.token_type_ids")]
            if extra:
                raise KeyError(f"unexpected tensors: {extra[:5]}")

    def param_groups(self, weight_decay):
        """Two AdamW groups as transformers' Trainer: decay for all but LayerNorm and biases."""
        no_decay_ids = set()
        for mod in self.modules():
            if isinstance(mod, nn.LayerNorm):
                no_decay_ids.update(id(p) for p in mod.parameters())
        for name, p in self.named_parameters():
            if name.endswith("bias") or name == "head_bias":
                no_decay_ids.add(id(p))
        decay = [p for p in self.parameters() if id(p) not in no_decay_ids]
        nodecay = [p for p in self.parameters() if id(p) in no_decay_ids]
        return [{"params": decay, "weight_decay": weight_decay}, {"params": nodecay, "weight_decay": 0.0}]


class TorchMLM(TorchEncoder):
    """RobertaForMaskedLM / BertForMaskedLM from torch modules (see module doc)."""

    def __init__(self, cfg):
        super().__init__(cfg)
        c = self.cfg
        H = c.hidden_size
        self.head_dense = nn.Linear(H, H)
        self.head_norm = nn.LayerNorm(H, eps=c.layer_norm_eps)
        self.head_bias = nn.Parameter(torch.zeros(c.vocab_size))
        self.init_weights()

    @torch.no_grad()
    def init_weights(self, generator=None):
        super().init_weights(generator)
        self.head_bias.zero_()

    def head(self, h):
        """MLM head on hidden rows (..., H): dense, exact GELU, LayerNorm, tied decoder + bias."""
        h = self.head_norm(F.gelu(self.head_dense(h)))
        return F.linear(h, self.word_embeddings.weight, self.head_bias)

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None, head_at_labels=False):
        """Returns (loss or None, logits). With head_at_labels the head runs only at rows whose
        label is not -100 and logits are (n_labelled, V); otherwise (B, T, V)."""
        h = self.encode(input_ids, attention_mask, token_type_ids)
        if head_at_labels:
            sel = labels.reshape(-1) != IGNORE
            logits = self.head(h.reshape(-1, h.shape[-1])[sel])
            return F.cross_entropy(logits, labels.reshape(-1)[sel]), logits
        logits = self.head(h)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), ignore_index=IGNORE)
        return loss, logits

    def hf_tensors(self):
        out = self.encoder_hf_tensors()
        if self.cfg.model_type == "roberta":
            names = ("lm_head.dense", "lm_head.layer_norm", "lm_head.bias")
        else:
            names = ("cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm", "cls.predictions.bias")
        out += [(names[0] + ".weight", self.head_dense.weight, None), (names[0] + ".bias", self.head_dense.bias, None),
                (names[1] + ".weight", self.head_norm.weight, None), (names[1] + ".bias", self.head_norm.bias, None),
                (names[2], self.head_bias, None)]
        return out

    def ignorable_hf_names(self, sd):
        """The tied decoder weight (checked equal to the word embeddings) and decoder.bias duplicates."""
        tied = "lm_head.decoder.weight" if self.cfg.model_type == "roberta" else "cls.predictions.decoder.weight"
        if tied in sd and not torch.equal(torch.as_tensor(sd[tied]), self.word_embeddings.weight):
            raise ValueError(f"{tied} is not tied to the word embeddings")
        return (tied, "lm_head.decoder.bias", "cls.predictions.decoder.bias")


def linear_schedule(warmup, total):
    """transformers' get_linear_schedule_with_warmup as a LambdaLR factor."""
    def f(step):
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, (total - step) / max(1, total - warmup))
    return f


# ---- self-test against a hand-written HF-style implementation -----------------------------
def _hf_ops(sd, eps):
    def lin(x, n):
        return x @ sd[n + ".weight"].t() + sd[n + ".bias"]

    def ln(x, n):
        mu = x.mean(-1, keepdim=True)
        var = ((x - mu) ** 2).mean(-1, keepdim=True)
        return (x - mu) / torch.sqrt(var + eps) * sd[n + ".weight"] + sd[n + ".bias"]

    def gelu(x):
        return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    return lin, ln, gelu


def hf_style_encode(sd, c, input_ids, attention_mask, token_type_ids=None):
    """The encoder of BertModel / RobertaModel written out with tensors named as HF's state
    dict, as transformers' modeling_bert.py computes it (additive finfo.min mask, scores
    scaled after q.k). Returns the last hidden states (B, T, H)."""
    pre = "roberta" if c.model_type == "roberta" else "bert"
    B, T = input_ids.shape
    H, A = c.hidden_size, c.num_attention_heads
    d = H // A
    lin, ln, gelu = _hf_ops(sd, c.layer_norm_eps)
    if token_type_ids is None:
        token_type_ids = torch.zeros_like(input_ids)

    if c.model_type == "roberta":
        m = (input_ids != c.pad_token_id).long()
        pos = torch.cumsum(m, 1) * m + c.pad_token_id
    else:
        pos = torch.arange(T).unsqueeze(0).expand(B, T)
    e = pre + ".embeddings."
    # HF's nn.Embedding(padding_idx=pad): the pad row gets no gradient from the lookup.
    x = F.embedding(input_ids, sd[e + "word_embeddings.weight"], padding_idx=c.pad_token_id) \
        + F.embedding(pos, sd[e + "position_embeddings.weight"],
                      padding_idx=c.pad_token_id if c.model_type == "roberta" else None) \
        + sd[e + "token_type_embeddings.weight"][token_type_ids]
    x = ln(x, e + "LayerNorm")
    add_mask = (1.0 - attention_mask[:, None, None, :].float()) * torch.finfo(torch.float32).min
    for i in range(c.num_hidden_layers):
        p = f"{pre}.encoder.layer.{i}."

        def heads(t):
            return t.view(B, T, A, d).transpose(1, 2)
        q = heads(lin(x, p + "attention.self.query"))
        k = heads(lin(x, p + "attention.self.key"))
        v = heads(lin(x, p + "attention.self.value"))
        s = q @ k.transpose(-1, -2) / math.sqrt(d) + add_mask
        ctx = (torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, H)
        x = ln(lin(ctx, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        f = lin(gelu(lin(x, p + "intermediate.dense")), p + "output.dense")
        x = ln(f + x, p + "output.LayerNorm")
    return x


def hf_style_forward(sd, c, input_ids, attention_mask, labels):
    """BertForMaskedLM / RobertaForMaskedLM on hf_style_encode. Returns (loss, logits (B,T,V))."""
    pre = "roberta" if c.model_type == "roberta" else "bert"
    e = pre + ".embeddings."
    lin, ln, gelu = _hf_ops(sd, c.layer_norm_eps)
    x = hf_style_encode(sd, c, input_ids, attention_mask)
    if c.model_type == "roberta":
        h = ln(gelu(lin(x, "lm_head.dense")), "lm_head.layer_norm")
        logits = h @ sd[e + "word_embeddings.weight"].t() + sd["lm_head.bias"]
    else:
        h = ln(gelu(lin(x, "cls.predictions.transform.dense")), "cls.predictions.transform.LayerNorm")
        logits = h @ sd[e + "word_embeddings.weight"].t() + sd["cls.predictions.bias"]
    loss = F.cross_entropy(logits.reshape(-1, c.vocab_size), labels.reshape(-1), ignore_index=IGNORE)
    return loss, logits


def _selftest():
    """Builds both model types, perturbs every tensor, compares logits, loss and every gradient
    with hf_style_forward in float64 (the two differ only in rounding order)."""
    torch.manual_seed(0)
    ok = True
    for mt in ("roberta", "bert"):
        cfg = dict(model_type=mt, vocab_size=53, hidden_size=24, num_hidden_layers=2, num_attention_heads=4,
                   intermediate_size=40, max_position_embeddings=30, type_vocab_size=1 if mt == "roberta" else 2,
                   pad_token_id=1 if mt == "roberta" else 0, layer_norm_eps=1e-5 if mt == "roberta" else 1e-12,
                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, initializer_range=0.2,
                   hidden_act="gelu")
        m = TorchMLM(cfg).double()
        with torch.no_grad():
            for _, p in m.named_parameters():
                p.add_(0.1 * torch.randn_like(p))
        pad = m.cfg.pad_token_id
        B, T = 3, 9
        ids = torch.randint(3, 53, (B, T))
        am = torch.ones(B, T, dtype=torch.long)
        am[1, 6:] = 0
        am[2, 2:] = 0
        ids[am == 0] = pad
        ids[0, 3] = pad  # a pad id that is attended to: padding_idx and RoBERTa position ids matter
        labels = torch.full((B, T), IGNORE)
        labels[0, 1] = 5; labels[0, 4] = 7; labels[1, 0] = 9; labels[1, 5] = 0; labels[2, 1] = 2
        loss, logits = m(ids, am, labels=labels)
        loss.backward()
        g_mod = m.hf_state_dict(grads=True)
        sd = {k: v.clone().requires_grad_(True) for k, v in m.hf_state_dict().items()}
        loss2, logits2 = hf_style_forward(sd, m.cfg, ids, am, labels)
        loss2.backward()
        errs = {"logits": (logits - logits2).abs().max().item(), "loss": abs(loss.item() - loss2.item())}
        for k in sd:
            errs["grad " + k] = (g_mod[k] - sd[k].grad).abs().max().item()
        loss3, _ = m(ids, am, labels=labels, head_at_labels=True)
        errs["head_at_labels loss"] = abs(loss3.item() - loss.item())
        worst = max(errs.items(), key=lambda kv: kv[1])
        good = worst[1] < 1e-10
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} torch_mlm {mt}: {len(errs)} comparisons, worst {worst[0]} {worst[1]:.2e}")
    return ok


if __name__ == "__main__":
    import sys
    if "--selftest" in sys.argv:
        sys.exit(0 if _selftest() else 1)
    print(__doc__)
