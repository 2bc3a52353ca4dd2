"""A quick, in-process check of what the offline reflector writes (no stack, no model).

Dev data only: LoCoMo conversations 1-5 and BEAM 100K conversations 1-5 (6-10 are held out).

  small talk    handwritten small-talk messages (user and assistant), one episode each:
                the share that produced at least one item (target: at most 2 %);
  kinds         handwritten sentences labelled with their kind: the share typed right;
  LoCoMo        each session one episode as bench/episodes_recall.py posts it: coverage (the
                share of the sessions' observation dia_ids some item comes from) and precision
                (the share of items that come from an observation's dia_id);
  BEAM          each batch's turns one episode (user + assistant): items per episode, the
                share of items taken from assistant messages, and a sample of them.

Run:  python bench/offline_reflector_check.py [--show N]"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from memworker import reflection

DATA = Path("/work/shared/benchdata")

SMALL_TALK: list[tuple[str, str]] = [
    ("user", "Sounds good, talk soon."),
    ("user", "No worries at all, have a nice weekend!"),
    ("assistant", "Thanks Dana, noted. Let me know if there is anything else I can help with."),
    ("user", "Hey! Good to see you! How have you been?"),
    ("user", "Thanks so much, that's really helpful!"),
    ("user", "Wow, that's so cool, I'm really happy for you!"),
    ("user", "Haha yeah, totally agree with you there."),
    ("user", "Bye! Take care and talk to you later."),
    ("user", "Have a great day, see you tomorrow!"),
    ("user", "Thank you for your help today, I really appreciate it."),
    ("user", "That makes sense, thanks for explaining."),
    ("user", "Perfect, that's exactly what I needed."),
    ("user", "Great, thanks! I'll try that."),
    ("user", "Cool, catch you later!"),
    ("user", "Good morning! Hope you slept well."),
    ("user", "Awesome, you're the best!"),
    ("user", "That sounds amazing, enjoy it!"),
    ("user", "Glad to hear that, keep it up!"),
    ("user", "Aww, that's so sweet of you to say."),
    ("user", "Sure thing, no problem at all."),
    ("user", "Okay, will do. Thanks again!"),
    ("user", "You're welcome, happy to help anytime."),
    ("user", "Congrats! That's a big deal, you should be proud."),
    ("user", "I'm so glad we had this chat, it was great catching up."),
    ("user", "Take care of yourself and enjoy the rest of your evening!"),
    ("user", "Good luck with everything, I'm rooting for you!"),
    ("user", "Hi there, hope you're doing well!"),
    ("user", "That's great news, I'm really happy for you!"),
    ("user", "Yep, totally. Talk soon!"),
    ("user", "Thanks, you too! Have a good one."),
    ("user", "Nice, that looks really cool!"),
    ("user", "Wow, love that! So cool!"),
    ("user", "Me too, can't wait to hear more about it."),
    ("user", "I appreciate you sharing that with me."),
    ("user", "It was nice talking to you, bye for now."),
    ("user", "Let's catch up again soon!"),
    ("user", "Sorry for the late reply, it's been a busy day."),
    ("user", "Thanks for the quick reply!"),
    ("user", "Alright, got it, thanks a lot."),
    ("user", "Hello, good evening!"),
    ("assistant", "You're welcome! Let me know if you have any other questions."),
    ("assistant", "Happy to help! Feel free to reach out anytime."),
    ("assistant", "Great question! I'd be glad to help with that."),
    ("assistant", "Thanks for the update, Dana. Noted."),
    ("assistant", "I hope this helps! Good luck with your project."),
    ("assistant", "Of course! Here is what you asked for."),
    ("assistant", "Understood, I'll keep that in mind."),
    ("assistant", "Sure, I can help you with that."),
    ("assistant", "That's a great idea, and it sounds like you're on the right track!"),
    ("assistant", "Thank you for the kind words, have a wonderful weekend!"),
    ("user", "Omg, that's awesome! Congrats!!"),
    ("user", "Hope you have a great time there!"),
    ("user", "That's really sweet, thanks for saying that."),
    ("user", "Ha, same here. Anyway, gotta run!"),
    ("user", "Thanks for listening, it means a lot."),
    ("user", "Totally agree, Mel. You're doing great."),
    ("user", "Good to know, thanks!"),
    ("user", "Right, that makes total sense now."),
    ("user", "Ok cool, talk to you tomorrow then."),
    ("user", "Thanks, Melanie! That's really sweet."),
]

# Written after the rules were tuned on SMALL_TALK: a check that they did not just learn the list.
SMALL_TALK_FRESH: list[tuple[str, str]] = [
    ("user", "Hiya! Long time no see."),
    ("user", "Thanks a bunch, Priya!"),
    ("user", "Lovely, cheers for that."),
    ("user", "Enjoy your holiday, you deserve it!"),
    ("user", "Oh nice, glad it worked out."),
    ("user", "Haha, that's hilarious!"),
    ("user", "All good, no rush."),
    ("user", "Night! Sleep well."),
    ("user", "Fingers crossed for you!"),
    ("user", "Sorry to hear that, hope things get better soon."),
    ("user", "That's so exciting, tell me everything!"),
    ("user", "You rock, thanks again for today."),
    ("user", "Happy birthday! Hope it's a great one."),
    ("user", "Great chatting with you, Sam!"),
    ("user", "Absolutely, count me in!"),
    ("assistant", "Glad I could help, Priya!"),
    ("assistant", "No problem at all. Have a great evening!"),
    ("assistant", "You're very welcome. Take care!"),
    ("assistant", "Got it, thanks for letting me know."),
    ("assistant", "Sounds like a plan! Let me know how it goes."),
]

KINDS: list[tuple[str, str]] = [
    ("Please always contact me by email.", "preference"),
    ("Don't call me before 10 am.", "preference"),
    ("Could you always reply in German?", "preference"),
    ("I prefer dark roast coffee.", "preference"),
    ("Never send me marketing newsletters.", "preference"),
    ("Please keep your answers short.", "preference"),
    ("I'd rather not get phone calls at work.", "preference"),
    ("I can't stand long meetings.", "preference"),
    ("Only message me on Slack, not on Teams.", "preference"),
    ("Do not share my address with the courier.", "preference"),
    ("I want the reports in PDF, not Excel.", "preference"),
    ("I'm not a fan of spicy food.", "preference"),
    ("Can you please use metric units from now on?", "preference"),
    ("My favourite band is Radiohead.", "preference"),
    ("I really dislike being put on hold.", "preference"),
    ("We decided to ship the release on Friday.", "decision"),
    ("We'll move the billing service to Postgres 16.", "decision"),
    ("I chose the blue plan for the team.", "decision"),
    ("We agreed that Raj owns the migration.", "decision"),
    ("I'm going to switch to the annual subscription.", "decision"),
    ("To restart the worker, drain the queue first and then roll the pods.", "method"),
    ("Run make migrate before you deploy.", "method"),
    ("We fixed it by raising the connection pool size.", "method"),
    ("Turns out the outage was caused by an expired certificate.", "conclusion"),
    ("The root cause was a missing index on orders.", "conclusion"),
    ("I went to a support group yesterday.", "event"),
    ("We visited my parents in Lisbon last weekend.", "event"),
    ("The deploy failed on 2024-03-02.", "event"),
    ("I started a new job at Globex last month.", "event"),
    ("My daughter Emma is seven years old.", "fact"),
    ("The invoice number is INV-4411.", "fact"),
    ("Dana works in the Berlin office.", "fact"),
    ("Our API runs on three replicas.", "fact"),
    ("I have two cats named Miso and Tofu.", "fact"),
    ("The staging database is called orders-stg.", "fact"),
]


def small_talk_rate(show: int, messages: list[tuple[str, str]]) -> float:
    r = reflection.OfflineReflector()
    bad = []
    for role, text in messages:
        out = r.reflect(reflection.Episode(text, [{"role": role, "content": text}]))
        if out.items:
            bad.append((role, text, [i.text for i in out.items]))
    for b in bad[:show]:
        print("   small talk kept:", b)
    return len(bad) / len(messages)


def kind_accuracy(show: int) -> float:
    r = reflection.OfflineReflector()
    right = 0
    for text, want in KINDS:
        out = r.reflect(reflection.Episode(text, [{"role": "user", "content": text}]))
        got = out.items[0].kind if out.items else "(none)"
        right += got == want
        if got != want and show:
            print(f"   kind: want {want:<10} got {got:<10} {text}")
    return right / len(KINDS)


def locomo(show: int) -> tuple[float, float, int]:
    convs = json.loads((DATA / "locomo/locomo10.json").read_text())[:5]
    r = reflection.OfflineReflector()
    observed = covered = items = good = 0
    shown = 0
    for conv in convs:
        c = conv["conversation"]
        for key in sorted(k for k in c if re.fullmatch(r"session_\d+", k)):
            turns = c[key]
            obs = {
                d
                for facts in conv["observation"].get(f"{key}_observation", {}).values()
                for _, ev in facts
                for d in ([ev] if isinstance(ev, str) else ev)
            }
            msgs = [
                {
                    "role": "user",
                    "name": t["speaker"],
                    "content": t["text"] + (f" [image: {t['blip_caption']}]" if t.get("blip_caption") else ""),
                }
                for t in turns
            ]
            out = r.reflect(reflection.Episode("", msgs))
            hit = set()
            for it in out.items:
                ids = {turns[m]["dia_id"] for m in it.messages}
                items += 1
                if ids & obs:
                    good += 1
                    hit |= ids & obs
                elif shown < show:
                    shown += 1
                    print("   LoCoMo item off the observations:", it.kind, it.text)
            observed += len(obs)
            covered += len(hit)
    return covered / max(1, observed), good / max(1, items), items


def beam(show: int) -> tuple[float, float]:
    r = reflection.OfflineReflector()
    items = from_assistant = episodes = 0
    sample = []
    for n in range(1, 6):
        chat = json.loads((DATA / f"beam/100K/{n}/chat.json").read_text())
        for batch in chat:
            for turn in batch["turns"]:
                msgs = [{"role": m["role"], "content": re.sub(r"\s*->->\s*[\d,\s]+$", "", m["content"])} for m in turn]
                out = r.reflect(reflection.Episode("", msgs))
                episodes += 1
                for it in out.items:
                    items += 1
                    if any(msgs[m]["role"] == "assistant" for m in it.messages):
                        from_assistant += 1
                        if len(sample) < show:
                            sample.append((it.kind, it.text))
    for s in sample:
        print("   BEAM item from the assistant:", s)
    return items / max(1, episodes), from_assistant / max(1, items)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--show", type=int, default=0, help="print up to N examples of each kind of miss")
    args = p.parse_args()
    st = small_talk_rate(args.show, SMALL_TALK)
    fresh = small_talk_rate(args.show, SMALL_TALK_FRESH)
    ka = kind_accuracy(args.show)
    cov, prec, n = locomo(args.show)
    per_ep, asst = beam(args.show)
    print(f"small talk producing an item: {st:.1%} of {len(SMALL_TALK)}")
    print(f"small talk (written after tuning) producing an item: {fresh:.1%} of {len(SMALL_TALK_FRESH)}")
    print(f"kind accuracy: {ka:.1%} of {len(KINDS)}")
    print(f"LoCoMo 1-5: observation coverage {cov:.1%}, precision {prec:.1%} ({n} items)")
    print(f"BEAM 1-5: {per_ep:.2f} items per episode, {asst:.1%} of items from assistant messages")


if __name__ == "__main__":
    main()
