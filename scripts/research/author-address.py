#!/usr/bin/env python3
"""Writes docs/held-back/address-holdout.jsonl: held-back rows of issue "Read who says it",
written in one pass before any candidate was tried on them and never trained on. Ordinary
messages that call the reader a name, an insult at the start or at the end (toxic and harassment
true), and the same shapes with an ordinary word of address (all four false). CC0, written for
this project.

    scripts/research/author-address.py
"""
from pathlib import Path

from authored_kinds import authored_rows, lab, write_rows

rows = []
BENIGN = lab()
INSULT = lab(toxic=True, harassment=True)
rows += authored_rows("address-insult", "en", [
    "Dumbass, the package was supposed to arrive on Tuesday and it's Friday now.",
    "Halfwit, did you even open the spreadsheet I sent you this morning?",
    "Clown, you booked the wrong hotel for the whole team again.",
    "Imbecile, the password you gave me doesn't work on the new portal.",
    "Jackass, stop parking your truck across my driveway every night.",
    "Why do you keep sending me the same invoice twice, you absolute muppet?",
    "Answer the question I asked instead of changing the subject, dimwit.",
    "You forgot to lock the office again last night, numbskull.",
    "Just send me the file already, you lazy slob.",
    "The meeting got moved to three, genius, try reading the calendar for once.",
], INSULT)
rows += authored_rows("address-insult", "id", [
    "Bego, paket yang kamu kirim salah alamat lagi.",
    "Dungu, laporan kemarin belum kamu kirim ke atasan ya?",
    "Otak udang, jadwal rapatnya jam dua, bukan jam empat.",
    "Babi, parkir motor jangan di depan pagar rumah orang.",
    "Bangke, kenapa chat aku cuma kamu read doang?",
    "Kamu tuh nyuruh orang terus tapi sendirinya nggak kerja, pemalas.",
    "Balikin charger aku sekarang juga, maling.",
    "Jangan sok ngatur di grup ini deh, dasar cupu.",
    "Udah berapa kali dibilang jangan telat, lelet banget sih kamu, lemot.",
    "Transferan kamu kurang sepuluh ribu, kere.",
], INSULT)
rows += authored_rows("address-benign", "en", [
    "Mate, the package was supposed to arrive on Tuesday and it's Friday now.",
    "Boss, did you get a chance to open the spreadsheet I sent this morning?",
    "Guys, the hotel booking for the team trip is confirmed for the 12th.",
    "Hi team, the password for the new portal will be emailed separately.",
    "Neighbour, could you move your truck a bit so I can get out of the driveway?",
    "Why is the same invoice showing up twice in my account, dear support team?",
    "Can you answer the question about the refund policy first, sir?",
    "You left the office unlocked last night, buddy, no harm done though.",
    "Just send me the file when you can, love.",
    "The meeting got moved to three, folks, check the updated calendar.",
], BENIGN)
rows += authored_rows("address-benign", "id", [
    "Kak, paket yang aku pesan dikirim ke alamat lama, bisa diubah?",
    "Pak, laporan kemarin sudah saya kirim ke email Bapak ya.",
    "Bu, jadwal rapatnya jadi jam dua atau jam empat?",
    "Mas, motornya boleh digeser sedikit? Saya mau keluar pagar.",
    "Sayang, kenapa chat aku belum dibalas dari tadi?",
    "Kamu sudah makan belum, nak? Ibu masak sayur asem.",
    "Tolong balikin charger aku nanti sore ya, bestie.",
    "Jangan lupa isi absen di grup ya, teman-teman.",
    "Udah berapa kali telat minggu ini, bro? Ada masalah di jalan?",
    "Transferannya kurang sepuluh ribu, kak, mohon dicek lagi.",
], BENIGN)
write_rows(Path(__file__).resolve().parents[2] / "docs/held-back/address-holdout.jsonl", rows)
print(len(rows))
