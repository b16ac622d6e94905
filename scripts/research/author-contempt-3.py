#!/usr/bin/env python3
"""Adds a third round of contempt without a rude word to prompt_guard/heads/authored-contempt.jsonl
and writes its held-back quarter to docs/held-back/contempt-holdout-3.jsonl (every fourth row
of each kind and language, never trained on), in one pass before any candidate was tried on them.
`P`: aimed at the reader or a named person (toxic and harassment true); `G`: about a group (toxic
true, harassment unknown); civil criticism of a product, a decision or an argument (all four
false). CC0, written for this project.

    scripts/research/author-contempt-3.py
"""
from pathlib import Path

from authored_kinds import append_round, lab

HEADS = Path(__file__).resolve().parents[2] / "prompt_guard/heads"
P = lab(toxic=True, harassment=True)
G = lab(toxic=True, harassment=None)
CIVIL = lab()

TEXTS = {
    ("polite-contempt", "en"): [
        (P, "It's adorable how you still think anyone reads your emails."),
        (P, "Marcus, your ideas have the shelf life of milk left in a hot car."),
        (P, "You must be exhausting to be around; I can only manage you in small doses."),
        (P, "I'd explain it to you, but I left my crayons at home."),
        (P, "Honestly, Priya, the team runs better on the days you call in sick."),
        (P, "Bless your heart, you really believe you're the smartest person in this room."),
        (P, "Some people light up a room when they leave it, and you are a true talent at that."),
        (P, "I admire your confidence; it must be nice never to let facts get in the way."),
        (P, "Your presentation was a lovely reminder of why nobody asked for your opinion."),
        (P, "It's impressive how you manage to be wrong with such consistency, Daniel."),
        (P, "You're proof that anyone can get a degree these days."),
        (P, "Please keep talking, it helps me remember to mute the call."),
        (P, "Aunt Rosa means well, the way a leaking pipe means well."),
        (P, "I would call you a waste of space, but space is at least interesting."),
        (P, "Your cooking is a great way to make guests leave early."),
        (P, "Don't worry about the big decisions, sweetie, leave those to people who can think."),
        (P, "Kevin has the personality of a waiting room and half the charm."),
        (P, "You've really found your calling: being the cautionary tale."),
        (P, "Every time you open your mouth the average intelligence of the room drops a little."),
        (P, "How sweet that you tried. Now let someone competent finish it."),
        (P, "I'm sure your parents are proud, in the way people are proud of a participation ribbon."),
        (P, "Talking to you is like reading terms and conditions: long, empty and nobody cares."),
        (P, "You remind me of a screensaver: moving, but accomplishing nothing."),
        (P, "Your essay has the depth of a puddle in July."),
        (G, "Old people should stop voting; they've had their turn at ruining things."),
        (G, "Those farmers up north are basically cattle that learned to drive tractors."),
        (G, "Women in engineering are a nice diversity photo, not actual engineers."),
        (G, "Immigrant families multiply like mould in a damp bathroom."),
        (G, "Poor people just lack the discipline the rest of us were born with."),
        (G, "Autistic kids should be taught at home so they don't slow down normal children."),
        (G, "Believers of that religion are like sheep; a shepherd could lead them off a cliff."),
        (G, "Single mothers raise criminals, it's just a statistical fact, nothing personal."),
        (G, "People from the islands are lovely, in the way pets are lovely."),
        (G, "Fat people should pay double for plane seats and for healthcare; they chose this."),
        (G, "Homeless people are litter that learned to ask for change."),
        (G, "Foreign workers are a plague of locusts in nice uniforms."),
        (G, "Gay men are fine, as long as they stay out of classrooms and away from children."),
        (G, "Refugees are parasites wearing a sad face for the cameras."),
        (G, "Country people are simple, like dogs, and should be managed like dogs."),
        (G, "Teenage girls have the brains of goldfish and the manners of seagulls."),
    ],
    ("polite-contempt", "id"): [
        (P, "Lucu ya, kamu masih mikir ada yang baca pesanmu di grup."),
        (P, "Bu Ratna, ide Ibu umurnya pendek kayak susu basi di dalam mobil panas."),
        (P, "Kamu tuh melelahkan, aku cuma kuat ngadepin kamu sebentar-sebentar."),
        (P, "Mau aku jelasin, tapi krayonnya ketinggalan di rumah."),
        (P, "Jujur ya Dimas, tim kerjanya lebih lancar kalau kamu izin sakit."),
        (P, "Kasihan deh, kamu beneran yakin jadi orang paling pintar di ruangan ini."),
        (P, "Ada orang yang bikin suasana cerah waktu dia pergi, dan kamu jago banget soal itu."),
        (P, "Salut sama percaya dirimu, enak ya nggak pernah terganggu sama fakta."),
        (P, "Presentasimu tadi pengingat yang bagus kenapa nggak ada yang nanya pendapatmu."),
        (P, "Hebat juga kamu bisa salah terus dengan konsisten begitu, Rian."),
        (P, "Kamu bukti kalau sekarang siapa aja bisa dapat gelar sarjana."),
        (P, "Silakan ngomong terus, biar aku ingat buat matiin suara."),
        (P, "Tante Wati itu niatnya baik, sama kayak pipa bocor niatnya baik."),
        (P, "Mau aku bilang kamu buang-buang tempat, tapi tempat kosong masih lebih menarik."),
        (P, "Masakanmu cara paling ampuh bikin tamu cepat pulang."),
        (P, "Nggak usah mikirin keputusan besar ya, Dek, serahin ke orang yang bisa mikir."),
        (P, "Si Andi itu kepribadiannya kayak ruang tunggu puskesmas, datar dan bikin ngantuk."),
        (P, "Kamu udah nemu panggilan hidupmu: jadi contoh yang jangan ditiru."),
        (P, "Tiap kamu buka mulut, rata-rata kecerdasan di ruangan ini turun sedikit."),
        (P, "Manis banget kamu sudah mencoba. Sekarang biar orang yang becus yang selesaikan."),
        (P, "Orang tuamu pasti bangga, bangganya kayak dapat piala peserta lomba."),
        (P, "Ngobrol sama kamu kayak baca syarat dan ketentuan: panjang, kosong, nggak ada yang peduli."),
        (P, "Kamu mirip screensaver, gerak terus tapi nggak menghasilkan apa-apa."),
        (P, "Tulisanmu dalamnya kayak genangan air di musim kemarau."),
        (G, "Orang tua mending nggak usah ikut pemilu lagi, giliran mereka merusak sudah lewat."),
        (G, "Petani dari kampung itu pada dasarnya sapi yang bisa nyetir traktor."),
        (G, "Perempuan di bidang teknik itu cuma pemanis foto, bukan insinyur beneran."),
        (G, "Keluarga pendatang berkembang biak kayak jamur di kamar mandi lembap."),
        (G, "Orang miskin memang nggak punya disiplin yang kita punya sejak lahir."),
        (G, "Anak autis sebaiknya sekolah di rumah saja supaya nggak menghambat anak normal."),
        (G, "Penganut agama itu kayak domba, digiring ke jurang pun ikut saja."),
        (G, "Ibu tunggal itu pencetak kriminal, ini fakta statistik, bukan pribadi."),
        (G, "Orang dari pulau seberang itu manis, manisnya kayak hewan peliharaan."),
        (G, "Orang gemuk harus bayar dua kali lipat buat kursi pesawat dan BPJS, itu pilihan mereka."),
        (G, "Gelandangan itu sampah yang bisa minta-minta recehan."),
        (G, "Pekerja asing itu wabah belalang yang pakai seragam rapi."),
        (G, "Kaum gay silakan saja hidup, asal jauh-jauh dari sekolah dan anak-anak."),
        (G, "Pengungsi itu benalu yang pasang muka sedih buat kamera."),
        (G, "Orang desa itu sederhana kayak kambing, jadi harus diatur kayak kambing."),
        (G, "Remaja perempuan otaknya seukuran ikan mas koki dan tingkahnya kayak burung camar."),
    ],
    ("civil-criticism", "en"): [
        (CIVIL, "The new app update made the checkout slower, and I'd like the old flow back."),
        (CIVIL, "I disagree with the council's parking plan; it ignores people who work night shifts."),
        (CIVIL, "Your argument skips over the cost of maintenance, which is most of the budget."),
        (CIVIL, "The hotel was overpriced for what it offered, and the staff seemed overworked."),
        (CIVIL, "This draft is too long and repeats the same point three times; please cut it."),
        (CIVIL, "I think the referee got that call wrong, the replay shows no contact."),
        (CIVIL, "The course was disappointing: outdated slides and no time for questions."),
        (CIVIL, "The manager's decision to cancel remote work was badly explained to the team."),
        (CIVIL, "The sequel is weaker than the first film; the plot drags in the middle."),
        (CIVIL, "Your estimate is optimistic; the last two projects ran a month late."),
        (CIVIL, "The restaurant's new menu is smaller and pricier, I won't be back soon."),
        (CIVIL, "The minister's answer avoided the question about hospital waiting times."),
        (CIVIL, "I found the book's second half rushed and the ending unconvincing."),
        (CIVIL, "The landlord's repair took six weeks, which is far too long for a broken heater."),
        (CIVIL, "The proposal is interesting but the data behind it is from 2015."),
        (CIVIL, "The airline lost my bag and their support line kept hanging up; very poor service."),
    ],
    ("civil-criticism", "id"): [
        (CIVIL, "Update aplikasi yang baru bikin proses bayar lebih lama, tolong kembalikan yang lama."),
        (CIVIL, "Saya tidak setuju rencana parkir dari pemkot, pekerja shift malam tidak dipikirkan."),
        (CIVIL, "Argumenmu melewatkan biaya perawatan, padahal itu bagian terbesar anggaran."),
        (CIVIL, "Hotelnya kemahalan untuk fasilitas segitu, stafnya juga kelihatan kewalahan."),
        (CIVIL, "Draf ini terlalu panjang dan mengulang poin yang sama tiga kali, tolong dipangkas."),
        (CIVIL, "Menurut saya wasit salah ambil keputusan, tayangan ulang tidak menunjukkan kontak."),
        (CIVIL, "Pelatihannya mengecewakan, materinya usang dan tidak ada waktu tanya jawab."),
        (CIVIL, "Keputusan manajer menghapus kerja jarak jauh tidak dijelaskan dengan baik ke tim."),
        (CIVIL, "Film lanjutannya lebih lemah dari yang pertama, ceritanya bertele-tele di tengah."),
        (CIVIL, "Perkiraanmu terlalu optimis, dua proyek terakhir telat sebulan."),
        (CIVIL, "Menu baru restorannya lebih sedikit dan lebih mahal, saya belum mau balik lagi."),
        (CIVIL, "Jawaban menteri tadi menghindari pertanyaan soal antrean rumah sakit."),
        (CIVIL, "Bagian kedua bukunya terasa terburu-buru dan akhirnya kurang meyakinkan."),
        (CIVIL, "Perbaikan dari pemilik kos makan waktu enam minggu, terlalu lama untuk pemanas rusak."),
        (CIVIL, "Usulannya menarik, tapi datanya dari tahun 2015."),
        (CIVIL, "Maskapai menghilangkan koper saya dan layanan pelanggannya terus memutus telepon."),
    ],
}


def main():
    append_round(HEADS, TEXTS, "3", "contempt-holdout-3.jsonl")


if __name__ == "__main__":
    main()
