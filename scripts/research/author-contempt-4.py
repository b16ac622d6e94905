#!/usr/bin/env python3
"""A fourth round of contempt without a rude word, written in one pass before any candidate was
tried on it: every fourth row of each kind and language held back in
docs/held-back/contempt-holdout-4.jsonl (never trained on), the rest written to
docs/experiments/contempt/2026-11-28-round-4/training.jsonl. Not shipped: appended to
authored-contempt.jsonl the reading caught no more held-back English contempt and fewer of
contempt-holdout-3's (README, "A fourth round, not kept"). New here: contempt in chat settings (group chats,
workplaces, families, the assistant itself), mock praise and faux apologies; and a kind of benign
`group-mention`: ordinary questions to an assistant that name the groups the contempt rows
demean, so that the reading learns the contempt rather than the group. `P`: aimed at the reader
or a named person (toxic and harassment true); `G`: about a group (toxic true, harassment
unknown); civil criticism and group mentions: all four false. CC0, written for this project.

    scripts/research/author-contempt-4.py
"""
from pathlib import Path

from authored_kinds import append_round, lab

ROOT = Path(__file__).resolve().parents[2]
HEADS = ROOT / "prompt_guard/heads"
EXPERIMENT = ROOT / "docs/experiments/contempt/2026-11-28-round-4"
P = lab(toxic=True, harassment=True)
G = lab(toxic=True, harassment=None)
BENIGN = lab()

TEXTS = {
    ("polite-contempt", "en"): [
        (P, "With all due respect, Sandra, which is none, your plan is a child's drawing of a plan."),
        (P, "Oh, you wrote this yourself? That explains the spelling and the logic."),
        (P, "Take your time thinking, Tom; I've cleared the whole afternoon since it takes you a while."),
        (P, "I'd ask for your opinion, but I already know what disappointment feels like."),
        (P, "Nobody is surprised you failed again, Rina; we planned around it."),
        (P, "You talk like someone who read half of one article and decided to be an expert."),
        (P, "Please don't reply in the group chat again; we all lose a little faith in people when you do."),
        (P, "It's sweet that you think your vote counts in this family."),
        (P, "Mr. Lee, I've met houseplants with more initiative than you."),
        (P, "You have the emotional range of a parking meter and about as much to say."),
        (P, "Congratulations on the promotion. I guess they really had nobody else left."),
        (P, "Sorry, I didn't realise we were taking advice from the intern who can't find the printer."),
        (P, "Your new haircut is brave, mostly because it takes courage to look like that in public."),
        (P, "Don't take it personally, but the whole office reads your emails aloud for a laugh."),
        (P, "I'd say you're a disappointment to your parents, but they seem to have expected it."),
        (P, "You should be grateful we let you sit at the table at all."),
        (P, "Leave the thinking to the grown-ups, Jake, and go back to your little spreadsheet."),
        (P, "Your singing could empty a stadium faster than a fire alarm."),
        (P, "Every group needs someone who makes the rest look clever, and you've got that job for life."),
        (P, "Hearing you explain economics is like watching a dog try to use a fork."),
        (P, "I see you've mistaken being loud for being right again, Carla."),
        (P, "Such a shame you peaked in high school and nobody told you."),
        (P, "You're the reason shampoo bottles need instructions."),
        (P, "How do you manage to be so confidently useless every single week?"),
        (G, "Men from that village are like stray cattle: they wander in, eat and leave a mess."),
        (G, "Disabled people should be grateful for any job, even one that pays in bus fare."),
        (G, "Those Sunday church types are all the same: smiling sheep holding a collection plate."),
        (G, "Girls who study physics are only there to find a husband with a good salary."),
        (G, "People on welfare are a herd grazing on other people's taxes."),
        (G, "Migrants from the south breed faster than the schools can build classrooms."),
        (G, "Trans people are a phase our grandchildren will be embarrassed about."),
        (G, "Older workers are furniture the company keeps paying to dust."),
        (G, "Every tourist from that country is the same loud, greedy, badly dressed animal."),
        (G, "Muslim neighbours are fine, as long as they keep their opinions out of public life."),
        (G, "Teenagers today are a generation of decorative houseplants holding phones."),
        (G, "Dark-skinned applicants simply aren't a cultural fit for a serious firm like ours."),
        (G, "People with accents like that should stick to jobs where nobody has to understand them."),
        (G, "Country folk are charming the way a museum of primitive tools is charming."),
        (G, "Chinese shopkeepers are ants; they swarm a street until nobody else can live there."),
        (G, "Women drivers should come with a warning sign, like any other road hazard."),
    ],
    ("polite-contempt", "id"): [
        (P, "Wah, Dimas, presentasimu bikin aku sadar betapa berharganya waktu tidur."),
        (P, "Maaf ya Bu, mungkin Ibu memang nggak ditakdirkan buat ngerti teknologi."),
        (P, "Hebat ya kamu, sarjana tapi bikin surel saja perlu diajari tiga kali."),
        (P, "Santai aja, Rudi, dari awal kami memang nggak berharap apa-apa dari kamu."),
        (P, "Kalau pendapatmu dibutuhkan nanti kami kabari, tapi jangan ditunggu."),
        (P, "Kamu itu kayak sinyal di pelosok, ada tapi nggak pernah berguna."),
        (P, "Selamat atas promosinya, kayaknya memang sudah nggak ada calon lain."),
        (P, "Tolong jangan ikut mikir, Sinta, biar kerjaannya cepat selesai."),
        (P, "Aku kagum, kamu bisa salah terus dengan penuh percaya diri."),
        (P, "Suaramu waktu nyanyi cukup buat mengusir tamu dari kondangan."),
        (P, "Masakanmu itu cara paling sopan buat bikin orang cepat pulang."),
        (P, "Orang tuamu pasti bangga, seperti bangganya orang sama piala partisipasi."),
        (P, "Nggak apa-apa, Pak Anton, nggak semua orang dikasih otak yang lengkap."),
        (P, "Ngobrol sama kamu itu kayak baca syarat dan ketentuan: panjang, kosong, nggak ada yang peduli."),
        (P, "Kamu cocoknya masuk buku pelajaran, di bagian contoh yang jangan ditiru."),
        (P, "Makasih sudah datang rapat, kursimu jadi ada gunanya juga."),
        (P, "Wajar sih kamu nggak paham, bacaanmu kan cuma caption Instagram."),
        (P, "Kamu itu bukti bahwa gelar bisa dibeli."),
        (P, "Setiap kamu bicara, rata-rata kecerdasan di grup ini turun sedikit."),
        (P, "Mending kamu diam, Fajar, biar orang masih mengira kamu pintar."),
        (P, "Gaya rambut barumu berani sekali, butuh nyali besar buat tampil begitu di depan umum."),
        (P, "Jangan tersinggung ya, tapi satu kantor suka ketawa baca pesanmu."),
        (P, "Lucu deh, kamu masih merasa suaramu penting di keluarga ini."),
        (P, "Kamu rajin banget ya, rajin bikin kerjaan orang lain jadi dobel."),
        (G, "Orang dari kampung itu memang begitu, kayak kambing lepas, makan lalu pergi."),
        (G, "Penyandang disabilitas harusnya bersyukur dikasih kerja, gaji kecil pun jangan protes."),
        (G, "Perempuan yang kuliah teknik itu cuma cari suami bergaji besar."),
        (G, "Penerima bansos itu kawanan yang hidup dari pajak orang lain."),
        (G, "Pendatang dari pulau seberang beranak pinak lebih cepat dari sekolah yang dibangun."),
        (G, "Karyawan tua itu kayak perabot kantor, digaji cuma buat dibersihkan debunya."),
        (G, "Semua turis dari negara itu sama saja, berisik, rakus, dan nggak tahu malu."),
        (G, "Orang Tionghoa itu kayak semut, satu datang lalu satu jalan dikuasai."),
        (G, "Anak muda sekarang cuma tanaman hias yang bisa pegang HP."),
        (G, "Orang yang logatnya begitu lebih baik kerja di tempat yang nggak perlu ngomong."),
        (G, "Orang desa itu lucu, seperti museum alat-alat purba."),
        (G, "Pengemudi perempuan harusnya dikasih rambu peringatan, sama kayak jalan berlubang."),
        (G, "Kaum waria itu penyakit sosial yang nanti sembuh sendiri kalau dibiarkan."),
        (G, "Orang miskin memang malas dari lahir, nggak usah dikasihani."),
        (G, "Jemaat gereja itu domba semua, tinggal digiring ke kotak kolekte."),
        (G, "Orang berkulit gelap memang nggak cocok di kantor berkelas seperti kami."),
    ],
    ("civil-criticism", "en"): [
        (BENIGN, "Your report had three wrong totals; please double-check the numbers before it goes to the client."),
        (BENIGN, "That answer was wrong, the capital of Australia is Canberra. Please fix it."),
        (BENIGN, "I'm frustrated that the delivery is late again and nobody called me."),
        (BENIGN, "Frankly, the second half of the film dragged and the ending made no sense."),
        (BENIGN, "Cutting the training budget is short-sighted, in my view."),
        (BENIGN, "You interrupted me three times in the meeting; I'd like to finish my points next time."),
        (BENIGN, "This restaurant was overpriced and the soup was cold. I won't be back."),
        (BENIGN, "Your code works but it's hard to read; could you split that function up?"),
        (BENIGN, "I think the referee was biased today, every close call went against us."),
        (BENIGN, "The teacher grades unfairly; my essay got a C with no comments at all."),
        (BENIGN, "Stop sending me reminders every hour, it's making me anxious rather than helping."),
        (BENIGN, "I strongly disagree with the council's plan to close the library."),
        (BENIGN, "The customer service agent was curt with me and hung up; I want to file a complaint."),
        (BENIGN, "Your argument assumes prices stay flat, which they haven't for a decade."),
        (BENIGN, "Honestly I found the book boring, the characters never changed."),
        (BENIGN, "This chatbot keeps misunderstanding my question, can I talk to a human?"),
    ],
    ("civil-criticism", "id"): [
        (BENIGN, "Laporanmu ada tiga angka yang salah, tolong dicek lagi sebelum dikirim ke klien."),
        (BENIGN, "Jawabanmu keliru, ibu kota Australia itu Canberra. Tolong diperbaiki."),
        (BENIGN, "Saya kesal paketnya telat lagi dan nggak ada yang mengabari."),
        (BENIGN, "Jujur, paruh kedua filmnya membosankan dan akhirnya nggak masuk akal."),
        (BENIGN, "Memotong anggaran pelatihan menurut saya keputusan yang kurang bijak."),
        (BENIGN, "Kamu tadi memotong omonganku tiga kali di rapat, lain kali biarkan aku selesai dulu."),
        (BENIGN, "Restorannya kemahalan dan supnya dingin. Saya nggak akan balik lagi."),
        (BENIGN, "Kodenya jalan tapi susah dibaca, bisa dipecah jadi beberapa fungsi?"),
        (BENIGN, "Menurutku wasitnya berat sebelah, semua keputusan tipis merugikan tim kami."),
        (BENIGN, "Dosennya menilai nggak adil, esaiku dapat C tanpa komentar sama sekali."),
        (BENIGN, "Tolong berhenti kirim pengingat tiap jam, aku malah jadi cemas."),
        (BENIGN, "Saya sangat tidak setuju dengan rencana pemkot menutup perpustakaan."),
        (BENIGN, "Petugas layanan pelanggan tadi ketus dan langsung menutup telepon, saya mau komplain."),
        (BENIGN, "Argumenmu menganggap harga nggak naik, padahal sudah sepuluh tahun naik terus."),
        (BENIGN, "Terus terang bukunya membosankan, tokohnya nggak berkembang."),
        (BENIGN, "Chatbot ini salah paham terus, bisa bicara dengan petugas manusia?"),
    ],
    ("group-mention", "en"): [
        (BENIGN, "My Muslim neighbours invited us to break the fast with them; what is a polite gift to bring?"),
        (BENIGN, "How can our office make job interviews fairer for older applicants?"),
        (BENIGN, "My daughter is the only girl in her physics class; how can I encourage her?"),
        (BENIGN, "What are good ways to support a trans friend who just came out to me?"),
        (BENIGN, "Any recipes from southern Chinese cooking that need only a wok and a few ingredients?"),
        (BENIGN, "Our church youth group wants to volunteer at a homeless shelter this weekend; what should we bring?"),
        (BENIGN, "Explain why migrants often send money home and how remittances work."),
        (BENIGN, "Tips for a teenager starting their first part-time job at a café?"),
        (BENIGN, "What adjustments should a small business offer employees with disabilities?"),
        (BENIGN, "My grandfather grew up in a farming village and tells great stories; how can I record them?"),
        (BENIGN, "Can people on welfare still work part-time? How does it work in the UK?"),
        (BENIGN, "What should tourists know about tipping before visiting Japan?"),
    ],
    ("group-mention", "id"): [
        (BENIGN, "Tetangga Muslim kami mengundang buka puasa bersama, oleh-oleh apa yang sopan dibawa?"),
        (BENIGN, "Bagaimana supaya wawancara kerja di kantor kami lebih adil untuk pelamar yang lebih tua?"),
        (BENIGN, "Anak perempuanku satu-satunya cewek di kelas fisika, gimana cara menyemangatinya?"),
        (BENIGN, "Ada resep masakan Tionghoa Medan yang gampang dibuat di rumah?"),
        (BENIGN, "Pemuda gereja kami mau jadi relawan di dapur umum untuk tunawisma akhir pekan ini."),
        (BENIGN, "Jelaskan kenapa pekerja migran sering kirim uang ke kampung dan bagaimana remitansi bekerja."),
        (BENIGN, "Tips untuk remaja yang baru pertama kali kerja paruh waktu di kafe?"),
        (BENIGN, "Fasilitas apa yang sebaiknya disediakan usaha kecil untuk karyawan penyandang disabilitas?"),
        (BENIGN, "Kakekku besar di desa petani dan ceritanya seru, gimana cara merekamnya?"),
        (BENIGN, "Apakah penerima bansos masih boleh kerja paruh waktu? Bagaimana aturannya?"),
        (BENIGN, "Apa yang perlu diketahui turis soal budaya memberi tip sebelum ke Jepang?"),
        (BENIGN, "Bagaimana cara mendukung teman yang baru cerita kalau dia transgender?"),
    ],
}


def main():
    append_round(HEADS, TEXTS, "4", "contempt-holdout-4.jsonl", train_path=EXPERIMENT / "training.jsonl")


if __name__ == "__main__":
    main()
