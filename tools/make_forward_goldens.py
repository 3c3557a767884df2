# A Qwen3.5 dense reference golden of other shapes than the public one, for the forward's tests,
# made on the GPU machine (torch + transformers 5.17, CPU fp32) with the project's reference factory
# (../shared/tools/refmodels.py: same perturbation, MTP head and golden format).
#
# qwen3_5_dense_c: 5 layers with full_attention_interval 3, 4 heads / 2 KV heads, head_dim 32,
# GDN Hk 2 / Hv 6 (ratio 3), Dk 16 > Dv 8, untied LM head, vocab 301, and T = 40 tokens so that a
# prefill crosses the engine's 32-row internal chunk.
#
#   python3 tools/make_forward_goldens.py --refmodels ../shared/tools --out OUT
import argparse, sys

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--refmodels", required=True, help="folder holding refmodels.py")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    sys.path.insert(0, a.refmodels)
    import refmodels as R
    import transformers as tf
    torch.set_grad_enabled(False)
    kw = dict(vocab_size=301, hidden_size=64, intermediate_size=128, num_hidden_layers=5,
              num_attention_heads=4, num_key_value_heads=2, head_dim=32,
              linear_num_key_heads=2, linear_num_value_heads=6, linear_key_head_dim=16,
              linear_value_head_dim=8, linear_conv_kernel_dim=4, full_attention_interval=3,
              tie_word_embeddings=False, rms_norm_eps=1e-6, max_position_embeddings=4096,
              rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                               "partial_rotary_factor": 0.25, "mrope_section": [2, 1, 1],
                               "mrope_interleaved": True})
    fam = ("qwen3_5_dense_c", tf.Qwen3_5TextConfig, tf.Qwen3_5ForCausalLM, "qwen3_5", kw)
    R.make_golden(a.out, fam, 9001, 40)


if __name__ == "__main__":
    main()
