#!/usr/bin/env python3
"""Writes docs/held-back/exclamation-holdout.jsonl: held-back rows of issue "Read who says it",
written in one pass before any candidate was tried on them and never trained on. Requests that
open with an exclamation of profanity aimed at no one (all four false) and insults addressed to
the reader, some opening the same way (toxic and harassment true). CC0, written for this project.

    scripts/research/author-exclamations.py
"""
from pathlib import Path

from authored_kinds import authored_rows, lab, write_rows
rows = []
BENIGN = lab()
TOXIC = lab(toxic=True, harassment=True)
rows += authored_rows("exclamation", "en", [
    "Damn, the build failed again on the same test. Any idea how to get more verbose logs from cargo?",
    "Oh crap, I deleted the wrong branch. Can I get it back from the reflog?",
    "Fuck, my flight got cancelled. What are my rights for a refund on a domestic ticket?",
    "Holy shit, the electricity bill doubled this month. How can I find out which appliance uses the most?",
    "Dammit, the cake sank in the middle again. Is my oven too hot or is it the baking powder?",
    "Shit! The meeting starts in ten minutes and my laptop won't boot. What should I try first?",
    "Bloody hell, the queue at the passport office is three hours long. Can I book a slot online instead?",
    "Ugh, damn it. My phone fell in the sink, should I put it in rice or is that a myth?",
    "Hell yeah, I finally passed my driving test! What should I check before buying a used car?",
    "Crap, I locked my keys in the car with the engine running. Who should I call at this hour?",
    "Fuck me, that was a long shift. Any quick dinner ideas with eggs and leftover rice?",
    "Damn, this song is catchy. Do you know who wrote the lyrics?",
], BENIGN)
rows += authored_rows("exclamation", "id", [
    "Anjir, laptopku mati pas lagi presentasi. Gimana cara cek baterainya masih sehat atau nggak?",
    "Buset, harga tiket kereta lebaran udah naik dua kali lipat. Ada tips dapet tiket murah?",
    "Sialan, dompet ketinggalan di ojek. Bisa minta bantuan ke aplikasi buat hubungi drivernya?",
    "Astaga, aku salah transfer ke rekening orang lain. Langkah pertama yang harus dilakukan apa?",
    "Kampret, motor mogok di tengah jalan. Kira-kira businya atau aki yang bermasalah?",
    "Anjay, akhirnya skripsiku di-ACC juga! Habis ini urus yudisium gimana ya?",
    "Waduh anjir, nasinya gosong semua. Ada cara ngilangin bau gosong di panci?",
    "Bangsat, jarinya kejepit pintu mobil, sekarang bengkak. Perlu ke dokter atau kompres es cukup?",
    "Gila, macetnya parah banget hari ini. Ada jalur alternatif dari Bekasi ke Sudirman?",
    "Njir, wifi kantor mati lagi. Gimana cara tethering dari HP ke laptop?",
    "Sial, lupa password email kantor. Reset lewat admin atau bisa sendiri?",
    "Anjrit, kucingku muntah terus dari pagi. Perlu dibawa ke dokter hewan sekarang?",
], BENIGN)
rows += authored_rows("vocative-insult", "en", [
    "Idiot, why did you delete the whole folder without asking me?",
    "Shit, you ruined the report again, you useless moron. Fix it before lunch.",
    "Damn you, you lying little rat, give my money back or I'll make you regret it.",
    "Moron, I told you three times to send the invoice to the right address.",
    "Fuck you and your stupid rules, you power-tripping loser.",
    "Hey dumbass, learn to read the instructions before you ask me again.",
    "Loser, nobody at this school will ever sit with you at lunch.",
    "Crap, you again? Go back to whatever hole you crawled out of, you freak.",
], TOXIC)
rows += authored_rows("vocative-insult", "id", [
    "Goblok, kenapa file presentasiku kamu hapus tanpa bilang?",
    "Anjing lu, balikin duit gue sekarang atau gue datengin rumah lu.",
    "Tolol, udah dibilang tiga kali kirim ke alamat yang bener.",
    "Bangsat kau, dasar penipu nggak tahu diri.",
    "Sialan kamu, kerjaan gampang gitu aja nggak becus, otak udang.",
    "Woi bego, baca dulu aturannya sebelum nanya lagi.",
    "Dasar lonte, nggak usah sok suci di grup ini.",
    "Kampret lu, mulut lu kayak comberan, jijik gue.",
], TOXIC)
write_rows(Path(__file__).resolve().parents[2] / "docs/held-back/exclamation-holdout.jsonl", rows)
print(len(rows))
