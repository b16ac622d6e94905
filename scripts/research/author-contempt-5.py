#!/usr/bin/env python3
"""Issue 40, a fifth round of contempt without a rude word, written in one pass (CC0, this
project's own words) before any candidate was tried on it, and held back whole: every row goes to
docs/held-back/contempt-holdout-5.jsonl, which nothing trains on. It measures readings of
other layers of the encoder for toxic's contempt map (README, "Contempt without a rude word").

    python3 scripts/research/author-contempt-5.py > docs/held-back/contempt-holdout-5.jsonl

P: aimed at the reader or a named person (toxic and harassment true); G: about a group (toxic
true, harassment unknown); C: civil criticism and M: ordinary questions naming a group (all four
false).
"""
import json

ROWS = {
    "en": [
        ("P", "Bless your heart, you really did try to read the whole contract this time."),
        ("P", "I'd explain it again, but I seem to have run out of crayons."),
        ("G", "People from that village always look surprised that soap exists."),
        ("P", "Don't worry, nobody expects much from someone with your upbringing."),
        ("P", "Talking to you is like arguing with a parking meter, except the meter sometimes gives something back."),
        ("G", "Their kind should really be kept away from decent neighbourhoods."),
        ("P", "Congratulations on finishing the report, Dimas. I assume your mother helped."),
        ("P", "It must be restful going through life with nothing going on upstairs."),
        ("G", "Old people should stop clogging up the queues and just stay at home where they belong."),
        ("P", "You have the charm of a damp basement and about half the insight."),
        ("P", "With respect, your opinion is worth roughly the paper it isn't written on."),
        ("G", "Those migrants multiply like rats and then act shocked that nobody wants them here."),
        ("C", "I disagree with your decision to cancel the meeting; it left the team without a plan."),
        ("C", "The new update made the app slower on my phone and I'd like the old version back."),
        ("C", "Your argument leaves out the cost to small farmers, which I think is the real issue."),
        ("C", "The service at this branch has been disappointing three visits in a row."),
        ("M", "Are there halal options at the company dinner for our Muslim colleagues?"),
        ("M", "My grandmother is 82 and wants to learn video calls; which app is easiest for her?"),
        ("M", "What should I know before hiring a caregiver who mostly speaks Javanese?"),
    ],
    "id": [
        ("P", "Wah hebat, akhirnya laporanmu tanpa salah ketik. Biasanya kan otakmu lagi cuti."),
        ("P", "Ngomong sama kamu itu kayak ngajarin kambing main catur."),
        ("G", "Orang kampung memang nggak usah diajak rapat penting, nanti malah bingung sendiri."),
        ("P", "Maaf ya, aku lupa kamu cuma lulusan paket C, wajar kalau nggak nyambung."),
        ("G", "Kaum seperti mereka sebaiknya dipisahkan saja dari masyarakat yang beradab."),
        ("G", "Sudahlah, perempuan itu urusannya dapur, nggak perlu ikut mikir strategi."),
        ("P", "Selamat ya Rina, baru kali ini ada yang mau dengar pendapatmu."),
        ("P", "Lihat wajahmu pagi-pagi saja sudah cukup bikin hariku suram."),
        ("G", "Pendatang dari pulau sebelah itu kerjanya cuma bikin kota kita kumuh."),
        ("P", "Kamu ini ibarat benalu, numpang hidup di kantor tanpa pernah berguna."),
        ("P", "Kasihan, niatnya kelihatan pintar tapi hasilnya selalu memalukan."),
        ("G", "Generasi kalian memang manja semua, disuruh kerja sedikit langsung menangis."),
        ("C", "Saya kurang setuju iuran dinaikkan tanpa rapat warga terlebih dahulu."),
        ("C", "Antrean di loket ini lambat sekali, mohon petugasnya ditambah."),
        ("C", "Menurut saya tampilan baru aplikasinya membingungkan untuk orang tua."),
        ("C", "Argumen Bapak belum menjawab soal biaya perawatan jalan desa."),
        ("M", "Apakah ada menu vegetarian untuk tamu yang beragama Hindu di acara nanti?"),
        ("M", "Nenek saya tuna rungu, aplikasi apa yang bagus untuk video call dengan teks otomatis?"),
        ("M", "Teman sekamar saya dari Papua, ada rekomendasi tempat makan papeda di Jakarta?"),
    ],
}

KIND = {"P": "polite-contempt", "G": "polite-contempt", "C": "civil-criticism", "M": "group-mention"}


def labels(mark):
    toxic = mark in "PG"
    harassment = True if mark == "P" else (None if mark == "G" else False)
    return {"spam": False, "toxic": toxic, "harassment": harassment, "financial_advice": False}


for lang, rows in ROWS.items():
    for n, (mark, text) in enumerate(rows, 1):
        kind = KIND[mark]
        print(json.dumps({
            "id": f"aegis_authored:{kind}-5:{lang}:{n}",
            "text": text,
            "lang": lang,
            "labels": labels(mark),
            "source": "aegis_authored",
            "kind": kind,
        }, ensure_ascii=False))
