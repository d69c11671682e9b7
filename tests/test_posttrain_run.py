"""solutions.posttrain_run, chapter 12's runs: poem shapes, sampling, one GRPO / DPO step on a toy model, LoRA."""
import pytest
import torch

from solutions import GPT, CharTokenizer
from solutions.posttrain_run import (
    add_lora,
    dpo_train,
    grpo_train,
    poem_shape,
    sample_group,
    sample_stats,
    sequence_logprobs,
)

QUATRAIN_5 = "床前明月光，疑是地上霜。举头望明月，低头思故乡。"
QUATRAIN_7 = "朝辞白帝彩云间，千里江陵一日还。两岸猿声啼不住，轻舟已过万重山。"
EIGHT_5 = "国破山河在，城春草木深。感时花溅泪，恨别鸟惊心。烽火连三月，家书抵万金。白头搔更短，浑欲不胜簪。"


@pytest.mark.parametrize("poem, shape", [
    (QUATRAIN_5, (5, 4)),
    (QUATRAIN_7 + "\n", (7, 4)),
    (EIGHT_5, (5, 8)),
    (QUATRAIN_7 + QUATRAIN_7, (7, 8)),
    (QUATRAIN_5 + "举头望明月，低头思故乡。", None),  # regular, but six lines
    ("床前明月光，疑是地上霜。举头望明月，低头思故。", None),  # a short line
    ("床前明月光。疑是地上霜，举头望明月，低头思故乡。", None),  # marks out of turn
    ("", None),
])
def test_poem_shape(poem, shape):
    assert poem_shape(poem) == shape


def test_sample_stats_counts_form_duplicates_and_the_top_shape():
    stats = sample_stats([QUATRAIN_5, QUATRAIN_5, QUATRAIN_7, EIGHT_5, "", "床前"])
    assert stats == dict(form=pytest.approx(400 / 6), dup=pytest.approx(100 / 6), top_shape=pytest.approx(200 / 6))
    with pytest.raises(ValueError, match="must not be empty"):
        sample_stats([])


def toy(seed=0):
    """A tiny GPT over the characters "ab\\n": a poem is the text after the prompt "\\n" up to the next newline."""
    torch.manual_seed(seed)
    tokenizer = CharTokenizer("ab\n")
    model = GPT(tokenizer.vocab_size, d_model=16, num_heads=2, num_kv_heads=1, d_ff=24, num_layers=2, max_len=16)
    return model.eval(), tokenizer


def first_a_prob(model, tokenizer):
    """P(the first written token is "a" | the prompt "\\n")."""
    with torch.no_grad():
        logits = model(tokenizer.encode("\n")[None])  # (1, 1, V)
    return logits[0, -1].softmax(-1)[tokenizer.encode("a")[0]].item()


def test_sample_group_shapes_and_poems():
    model, tokenizer = toy()
    ids, poems = sample_group(model, tokenizer, "\n", 6, 5, torch.Generator().manual_seed(0))
    assert ids.shape == (6, 6)
    assert poems == [tokenizer.decode(row[1:]).split("\n")[0] if "\n" in tokenizer.decode(row[1:]) else ""
                     for row in ids]


def test_one_grpo_step_moves_the_reward_up():
    model, tokenizer = toy()
    before = first_a_prob(model, tokenizer)
    history = grpo_train(model, tokenizer, "\n", steps=1, max_new_tokens=4, n_groups=4, group_size=8, lr=1e-2,
                         reward=lambda poem: float(poem.startswith("a")))
    assert 0 < history["reward"][0] < 1  # both kinds in the batch: the advantages are not all zero
    assert history["kl"] == [pytest.approx(0.0, abs=1e-6)]  # the first step's policy is the reference
    assert history["steps"] == 1 and history["seconds"] > 0
    assert first_a_prob(model, tokenizer) > before + 0.01


def test_dpo_steps_prefer_the_chosen_rows():
    model, tokenizer = toy()
    chosen = tokenizer.encode("\naa\n").repeat(8, 1)  # (8, 4)
    rejected = tokenizer.encode("\nbb\n").repeat(8, 1)  # (8, 4)
    end_id = tokenizer.encode("\n")[0].item()

    def margin():
        with torch.no_grad():
            return (sequence_logprobs(model, chosen, 1, end_id) - sequence_logprobs(model, rejected, 1, end_id))[0]

    before = margin().item()
    history = dpo_train(model, chosen, rejected, 1, end_id, steps=3, lr=1e-2, batch_size=4)
    assert len(history["loss"]) == 3 and history["loss"][0] == pytest.approx(0.6931, abs=1e-3)  # log 2 at step 1
    assert margin().item() > before + 0.1


def test_add_lora_counts_r_times_in_plus_out_and_keeps_the_outputs():
    model, _ = toy()
    x = torch.tensor([[0, 1, 2, 1]])  # (1, 4)
    with torch.no_grad():
        before = model(x)
    r, d, d_kv, d_ff = 3, 16, 8, 24  # d_kv = num_kv_heads * head_dim = 1 * 16 / 2
    per_block = r * ((d + d) + 2 * (d + d_kv) + (d + d) + 2 * (d + d_ff) + (d_ff + d))
    assert add_lora(model, r=r, alpha=6) == 2 * per_block
    with torch.no_grad():
        assert torch.allclose(model(x), before, atol=1e-6)  # B = 0 at first
    trained = {name for name, p in model.named_parameters() if p.requires_grad}
    assert trained and all(name.endswith((".A", ".B")) for name in trained)


def test_the_figures_draw_a_grpo_history_with_labels():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from tutor.plots.posttrain import plot_form_rate, plot_reward_kl  # the package's names are blanks under nbgrader

    model, tokenizer = toy()
    history = grpo_train(model, tokenizer, "\n", steps=2, max_new_tokens=3, n_groups=2, group_size=4)
    plt.close("all")
    for plot in (plot_reward_kl, plot_form_rate):
        ax = plot(history).axes[0]
        assert ax.get_title() and ax.get_xlabel() == "GRPO step" and ax.get_ylabel()
    assert len(ax.get_lines()) == 1 + 4 + 1  # plot_form_rate's: form, the four shapes, the target
    with pytest.raises(ValueError, match="non-empty"):
        plot_reward_kl(dict(reward=[], kl=[]))
