# Extra reference goldens for mtplx, made on the GPU machine (torch + transformers 5.17, CPU fp32).
#
# The public goldens (../shared/goldens, made by ../shared/tools/refmodels.py) cover one shape per
# family. This script reuses that factory (perturb, MTP head, golden writer) to make *other* shapes
# of the same families, so tests prove nothing is hard-coded, plus a DeepSeek-V3 checkpoint that
# carries its MTP layer the way real ones do (model.layers.{num_hidden_layers}.*: enorm, hnorm,
# eh_proj, shared_head.{norm,head}, a full decoder block) with reference MTP logits.
#
#   python3 tools/make_goldens.py --refmodels ../shared/tools --out OUT
import argparse, os, sys

import torch
import torch.nn as nn


def qwen35_shapes():
    import transformers as tf
    rope = {"rope_type": "default", "rope_theta": 1000000.0, "partial_rotary_factor": 0.5,
            "mrope_section": [2, 1, 1], "mrope_interleaved": True}
    dense = dict(vocab_size=300, hidden_size=48, intermediate_size=96, num_hidden_layers=6,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                 linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=8,
                 linear_value_head_dim=16, linear_conv_kernel_dim=4, full_attention_interval=3,
                 tie_word_embeddings=False, rms_norm_eps=1e-6, max_position_embeddings=4096,
                 rope_parameters=rope)
    moe = dict(dense, num_experts=6, num_experts_per_tok=3, moe_intermediate_size=24,
               shared_expert_intermediate_size=40, tie_word_embeddings=True)
    moe.pop("intermediate_size")
    nxt = dict(dense, num_experts=5, num_experts_per_tok=2, moe_intermediate_size=24,
               shared_expert_intermediate_size=40, norm_topk_prob=False, decoder_sparse_step=2,
               mlp_only_layers=[4], rope_parameters={"rope_type": "default", "rope_theta": 1000000.0,
                                                     "partial_rotary_factor": 0.5})
    return [
        ("qwen3_5_dense_b", tf.Qwen3_5TextConfig, tf.Qwen3_5ForCausalLM, "qwen3_5", dense),
        ("qwen3_5_moe_b", tf.Qwen3_5MoeTextConfig, tf.Qwen3_5MoeForCausalLM, "qwen3_5_moe", moe),
        ("qwen3_next_b", tf.Qwen3NextConfig, tf.Qwen3NextForCausalLM, "qwen3_next", nxt),
    ]


def ar_shapes():
    import transformers as tf
    return [
        ("qwen3_dense_b", tf.Qwen3Config, tf.Qwen3ForCausalLM, None,
         dict(vocab_size=300, hidden_size=48, intermediate_size=80, num_hidden_layers=2,
              num_attention_heads=6, num_key_value_heads=3, head_dim=16, tie_word_embeddings=False,
              rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
        ("llama_llama3rope", tf.LlamaConfig, tf.LlamaForCausalLM, None,
         dict(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
              max_position_embeddings=256,
              rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
                               "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 16})),
        ("llama_linearrope", tf.LlamaConfig, tf.LlamaForCausalLM, None,
         dict(vocab_size=300, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=1, tie_word_embeddings=False,
              rope_parameters={"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0})),
        ("deepseek_v3_b", tf.DeepseekV3Config, tf.DeepseekV3ForCausalLM, None,
         dict(vocab_size=300, hidden_size=64, intermediate_size=96, moe_intermediate_size=24,
              num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4,
              n_shared_experts=2, n_routed_experts=8, num_experts_per_tok=3, n_group=4, topk_group=2,
              first_k_dense_replace=2, q_lora_rank=24, kv_lora_rank=16, qk_rope_head_dim=8,
              qk_nope_head_dim=8, v_head_dim=12, routed_scaling_factor=1.5, norm_topk_prob=False,
              tie_word_embeddings=False, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
    ]


class DeepseekMTP(nn.Module):
    """DeepSeek-V3 MTP module (paper §2.2): h' = eh_proj(cat[enorm(emb(x_{t+1})), hnorm(h_t)]),
    one full decoder block, shared_head.norm, shared_head.head. h_t is the trunk's post-final-norm
    hidden (as vLLM's deepseek_mtp feeds it)."""

    def __init__(self, cfg, layer_cls, norm_cls, layer_idx):
        super().__init__()
        H, eps = cfg.hidden_size, cfg.rms_norm_eps
        self.enorm = norm_cls(H, eps=eps)
        self.hnorm = norm_cls(H, eps=eps)
        self.eh_proj = nn.Linear(2 * H, H, bias=False)
        self.block = layer_cls(cfg, layer_idx)
        self.shared_head_norm = norm_cls(H, eps=eps)
        self.shared_head = nn.Linear(H, cfg.vocab_size, bias=False)

    def forward(self, emb, hidden, pos_emb, mask):
        x = self.eh_proj(torch.cat([self.enorm(emb), self.hnorm(hidden)], -1))
        out = self.block(x, position_embeddings=pos_emb, attention_mask=mask, position_ids=None)
        if isinstance(out, tuple):
            out = out[0]
        return self.shared_head(self.shared_head_norm(out))


def make_deepseek_mtp(R, outdir, seed, T):
    import transformers as tf
    from safetensors.torch import load_file, save_file
    kw = dict(vocab_size=256, hidden_size=64, intermediate_size=128, moe_intermediate_size=32,
              num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2, n_shared_experts=1,
              n_routed_experts=4, num_experts_per_tok=2, n_group=2, topk_group=1, first_k_dense_replace=1,
              q_lora_rank=32, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=16, v_head_dim=16,
              routed_scaling_factor=2.5, norm_topk_prob=True, tie_word_embeddings=False,
              num_nextn_predict_layers=1, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    cfg = tf.DeepseekV3Config(**kw)
    cfg._attn_implementation = "eager"
    model = tf.DeepseekV3ForCausalLM(cfg).float().eval()
    R.perturb(model, g)
    M = __import__("transformers.models.deepseek_v3.modeling_deepseek_v3", fromlist=["x"])
    N = cfg.num_hidden_layers
    mtp = DeepseekMTP(cfg, M.DeepseekV3DecoderLayer, M.DeepseekV3RMSNorm, N).float().eval()
    R.perturb(mtp, g)
    # e_score_correction_bias is a buffer: make it non-trivial so a missing bias cannot pass
    for name, b in list(model.named_buffers()) + list(mtp.named_buffers()):
        if "e_score_correction_bias" in name:
            b.copy_(torch.randn(b.shape, generator=g) * 0.1)
    d = os.path.join(outdir, "deepseek_v3_mtp")
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    ids = torch.randint(0, cfg.vocab_size, (1, T), generator=g)
    with torch.no_grad():
        h = model.model(input_ids=ids, use_cache=False).last_hidden_state
        logits = model.lm_head(h)
        emb = model.model.embed_tokens(ids[:, 1:])
        hh = h[:, :-1]
        ml = mtp(emb, hh, R.rope(model, hh, T - 1), R.causal_mask(T - 1, hh.device, hh.dtype))
    st = load_file(os.path.join(d, "model.safetensors"))
    pre = f"model.layers.{N}."
    st[pre + "embed_tokens.weight"] = model.model.embed_tokens.weight.detach().clone().contiguous()
    st[pre + "enorm.weight"] = mtp.enorm.weight.detach().contiguous()
    st[pre + "hnorm.weight"] = mtp.hnorm.weight.detach().contiguous()
    st[pre + "eh_proj.weight"] = mtp.eh_proj.weight.detach().contiguous()
    st[pre + "shared_head.norm.weight"] = mtp.shared_head_norm.weight.detach().contiguous()
    st[pre + "shared_head.head.weight"] = mtp.shared_head.weight.detach().contiguous()
    for k, v in mtp.block.state_dict().items():
        st[pre + k] = v.detach().contiguous()
    save_file(st, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    gold = {"input_ids": ids[0].to(torch.int32).contiguous(), "logits": logits[0].float().contiguous(),
            "hidden": h[0].float().contiguous(), "mtp_logits": ml[0].float().contiguous()}
    save_file(gold, os.path.join(d, "golden.safetensors"),
              metadata={"family": "deepseek_v3_mtp", "seed": str(seed),
                        "reference": "transformers fp32 eager, CPU; MTP module per DeepSeek-V3 §2.2 (tools/make_goldens.py)",
                        "mtp_logits": "mtp_logits[t] = shared_head(MTP(embed(input_ids[t+1]), hidden[t])) at position t"})
    print("golden deepseek_v3_mtp", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--refmodels", required=True, help="folder holding refmodels.py")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    sys.path.insert(0, a.refmodels)
    import refmodels as R
    torch.set_grad_enabled(False)
    os.makedirs(a.out, exist_ok=True)
    for i, fam in enumerate(qwen35_shapes() + ar_shapes()):
        try:
            R.make_golden(a.out, fam, 4242 + i, 21)
        except Exception as e:  # keep going: one family's failure must not hide the others
            print("FAILED", fam[0], repr(e), flush=True)
    try:
        make_deepseek_mtp(R, a.out, 777, 19)
    except Exception as e:
        print("FAILED deepseek_v3_mtp", repr(e), flush=True)


if __name__ == "__main__":
    main()
