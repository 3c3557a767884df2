# YaRN RoPE goldens for mtplx's family support, made on the GPU machine (torch + transformers 5.17,
# CPU fp32 eager) with the reference factory of the public goldens (refmodels.py: perturbation,
# golden file format). Real DeepSeek-V3 configs use YaRN (factor, mscale, mscale_all_dim, which also
# scales MLA's softmax), and Qwen3 long-context configs do too (no mscale: cos/sin scaled by
# 0.1 ln(factor) + 1).
#
#   python3 tools/make_family_goldens.py --refmodels DIR_WITH_refmodels.py --out OUT
import argparse, os, sys

import torch


def shapes():
    import transformers as tf
    return [
        ("deepseek_v3_yarn", tf.DeepseekV3Config, tf.DeepseekV3ForCausalLM, None,
         dict(vocab_size=300, hidden_size=64, intermediate_size=96, moe_intermediate_size=24,
              num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=16384,
              n_shared_experts=1, n_routed_experts=8, num_experts_per_tok=2, n_group=2, topk_group=1,
              first_k_dense_replace=1, q_lora_rank=24, kv_lora_rank=16, qk_rope_head_dim=8,
              qk_nope_head_dim=8, v_head_dim=12, routed_scaling_factor=2.0, norm_topk_prob=True,
              tie_word_embeddings=False,
              rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                               "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1,
                               "mscale": 1.0, "mscale_all_dim": 0.8})),
        # MLA without q LoRA (q_proj), NeoX (non-interleaved) rope, softmax-free defaults otherwise
        ("deepseek_v3_noqlora", tf.DeepseekV3Config, tf.DeepseekV3ForCausalLM, None,
         dict(vocab_size=256, hidden_size=64, intermediate_size=96, moe_intermediate_size=16,
              num_hidden_layers=2, num_attention_heads=3, num_key_value_heads=3,
              n_shared_experts=1, n_routed_experts=6, num_experts_per_tok=2, n_group=3, topk_group=2,
              first_k_dense_replace=1, q_lora_rank=None, kv_lora_rank=12, qk_rope_head_dim=4,
              qk_nope_head_dim=12, v_head_dim=8, routed_scaling_factor=1.0, norm_topk_prob=True,
              rope_interleave=False, tie_word_embeddings=True,
              rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
        ("qwen3_yarn", tf.Qwen3Config, tf.Qwen3ForCausalLM, None,
         dict(vocab_size=300, hidden_size=48, intermediate_size=80, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, head_dim=16, tie_word_embeddings=False,
              max_position_embeddings=16384,
              rope_parameters={"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
                               "original_max_position_embeddings": 4096})),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--refmodels", required=True, help="folder holding refmodels.py")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    sys.path.insert(0, a.refmodels)
    import refmodels as R
    torch.set_grad_enabled(False)
    os.makedirs(a.out, exist_ok=True)
    for i, fam in enumerate(shapes()):
        try:
            R.make_golden(a.out, fam, 9100 + i, 21)
        except Exception as e:  # keep going: one failure must not hide the other
            print("FAILED", fam[0], repr(e), flush=True)


if __name__ == "__main__":
    main()
