# Authored for AEGIS Console (CC0): a second, larger set of contempt without profanity (issue 40)
# and harsh-but-civil criticism beside it, so a head that learns contempt is shown what is not.
# Written in one pass before any candidate was tried on them; every fourth row of each (kind, lang)
# is held back in contempt-holdout.jsonl, which nothing trains on. Run from the repository root.
import os
import sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from authored_kinds import lab, write_split  # noqa: E402
R = {}
# Contempt: toxic. Harassment true when aimed at the reader or a named person (P); unknown (null)
# for a generalisation about a group (G), as in author-kinds.py.
R[("polite-contempt", "en")] = (None, """P Wow, you used a big word today. Did someone help you spell it?
G People from that part of town don't really raise children, they just let them happen.
P I'd love to take your advice seriously, but I've seen how you live.
P Don't worry about the meeting, Kevin; nobody expects you to follow the grown-up parts.
G Let's be honest, those people only come here to take what others have built.
P Your confidence is impressive for someone who gets everything wrong.
P Sweetie, the adults are talking. Go play somewhere else.
G Single mothers produce the next generation of criminals, it's just statistics.
P I see you've posted again. The internet really will let anyone type.
P Maria means well, bless her, but she has the thinking skills of a houseplant.
G Those foreigners smell, and everyone is too polite to say it.
P Fascinating take. Did you come up with it all by yourself, or did the voices help?
P You should be proud; not everyone can fail this consistently.
G Country folk are simple creatures; you can't expect manners from them.
P Please don't have children. The world has enough people like you.
P Honestly, I'm amazed you found the login button.
G Their culture is backwards and they should be grateful we let them in at all.
P Tom, your presentation was a lovely reminder of why we don't let interns speak.
P It's fine, I've lowered my expectations of you to the floor and you still crawl under them.
G Trans people are confused and shouldn't be allowed near our kids.
P I'm not saying you're useless, I'm saying you'd improve the team by leaving it.
P Have you considered that maybe thinking just isn't your thing?
G Asians are all the same, you can't tell one from another and they all cheat.
P Oh look, the expert has arrived. Everyone please pretend to be impressed.
P You're about as helpful as a screen door on a submarine.
G Homeless people chose that life; they are rubbish that walks.
P Jenny, darling, that dress would look better on someone with a personality.
P Your opinion has been noted and will be ignored, as usual.
G Women drivers should be banned; they simply lack the brains for the road.
P Good effort. Shame that effort is all you'll ever have.
P I'd call you a clown, but clowns are at least paid to be this embarrassing.
G Those tribes have been stealing since forever; it's in their blood.
P Mr Patel, we appreciate your service, but frankly your accent makes clients uncomfortable.
P How lucky you are to be pretty, since nothing else about you will get you anywhere.
G Autistic kids are a burden on schools and should be kept in separate buildings.
P I've met smarter furniture, and I mean that kindly.
P If you were any more dim, we'd have to water you.
G Poor families shouldn't be allowed children they can't pay for. They're a plague.
P Thanks for volunteering, Dave. Next time maybe volunteer to stay home.
P Remarkable how someone can be so loud and say so little.
G Those people are animals who have learned to wear suits.
P Your little blog is cute, like a child's drawing on a fridge.
P It must be exhausting being you. It's certainly exhausting being near you.
G Gypsies are thieves by nature, everyone knows it, I'm just saying it politely.
P Kindly stay in your lane; yours is the one for the slow children.
P Nobody asked, Brian, and nobody ever will.
G Their women are oppressed because their men are primitive. Simple as that.
P You're like a cloud: when you disappear, it's a beautiful day.
P I'm sure someone out there finds you interesting. Probably your cat.
G Older workers are dead weight; companies should clear them out like old furniture.
P Let me use small words so you can keep up.
P With your talent, Sophie, you should consider a career where nobody sees your work.
G People with tattoos are trash and you can tell just by looking at them.
P Such a brave opinion from someone who has never read a book.
P Wow. I didn't think it was possible to disappoint me more, but here we are.
G Those refugees are leeches, the whole lot of them, and I'm being generous.
P Is your brain on holiday or is this its normal setting?
P Your cooking is a lot like your personality: bland and hard to swallow.
G Fat kids are the product of lazy parents; they should be taken away.
P Careful, Liam, you might hurt yourself thinking that hard.
P Everyone here is grateful you're only part-time.
G Villagers like them will never understand anything beyond goats and rice.
P You have a face for radio and a voice for silent films.
P I see your parents gave up on you early, and honestly, I understand why.
G Mentally ill people are weak, and pretending otherwise makes society weaker.
P That's adorable. You think you matter here.
P I'm not insulting you, I'm describing you.
G Their men are lazy and their women are loose; every visitor says the same.
P If ignorance is bliss, Rachel must be the happiest person alive.
P Please keep talking. I need something to help me fall asleep.
G Disabled people shouldn't ride the bus at rush hour; they're a nuisance to the rest of us.
P Your degree must have come free with a box of cereal.
P Here comes the office charity case. Let's all smile and pretend she's useful.
G Black people just aren't suited to jobs that require thinking.
P You're the reason shampoo bottles have instructions.
P Every group has one person who drags it down. Here, that's you.
G Those people multiply like mice, and soon there will be no room left for us.
P Such a shame you didn't get any of the looks your sister got.
P I'd tell you to use your head, but I'd hate to ask for the impossible.
G Honestly, the world would be quieter and cleaner without their kind.""")
R[("polite-contempt", "id")] = (None, """P Wah, ternyata kamu bisa baca juga. Kemajuan besar.
G Orang dari pulau itu memang nggak pernah bisa kerja benar, sudah bawaan.
P Saya salut, Mas, bisa percaya diri padahal isinya nol.
P Nggak apa-apa kok kamu nggak ngerti, memang bukan levelmu.
G Kaum pendatang itu cuma numpang makan dan bikin rusuh.
P Pendapatmu sudah dicatat, dan langsung dilupakan seperti biasa.
P Dek, ini obrolan orang dewasa. Main sana.
G Anak janda biasanya nggak punya didikan, kelihatan dari kelakuannya.
P Selamat ya, kamu konsisten banget gagalnya.
P Bu Sari itu baik, cuma otaknya ketinggalan di rumah setiap hari.
G Orang-orang itu bau, cuma kita terlalu sopan buat bilang.
P Idenya menarik sekali. Kamu pikirkan sendiri, atau dibantu tetangga?
P Mohon jangan punya anak ya, dunia sudah cukup dengan satu orang seperti kamu.
G Orang desa memang begitu, diajari sopan santun juga percuma.
P Jujur saya kaget kamu bisa nemu tombol login.
G Budaya mereka terbelakang, harusnya bersyukur masih boleh tinggal di sini.
P Mas Doni, presentasinya bagus buat mengingatkan kenapa anak magang nggak boleh bicara.
P Harapan saya ke kamu sudah serendah lantai, dan kamu masih bisa lewat di bawahnya.
G Waria itu sakit jiwa, jangan biarkan dekat anak-anak.
P Saya nggak bilang kamu nggak berguna, cuma tim ini lebih baik tanpa kamu.
P Pernah kepikiran nggak, mungkin berpikir memang bukan bakatmu?
G Orang keturunan itu semuanya licik, cuma pintar soal duit.
P Oh, pakarnya sudah datang. Ayo semua pura-pura kagum.
G Gelandangan itu sampah yang bisa jalan, mereka sendiri yang memilih hidup begitu.
P Kak Nia, bajunya cantik, sayang yang pakai nggak punya kepribadian.
G Perempuan nyetir itu bahaya, otaknya memang nggak nyampe.
P Usahanya bagus kok. Sayang usaha cuma satu-satunya yang kamu punya.
P Saya mau bilang kamu badut, tapi badut setidaknya dibayar buat memalukan diri.
G Suku mereka dari dulu tukang nyolong, sudah mendarah daging.
P Pak Budi, terima kasih atas pengabdiannya, tapi logat Bapak bikin klien nggak nyaman.
P Untung kamu cantik, soalnya modal lain nggak ada.
G Anak autis itu cuma beban sekolah, pisahkan saja di gedung lain.
P Saya pernah ngobrol sama kursi yang lebih nyambung daripada kamu.
G Keluarga miskin nggak usah punya anak, cuma nambah hama di negeri ini.
P Makasih sudah jadi relawan, Rudi. Lain kali jadi relawan diam di rumah saja ya.
P Luar biasa ya, suaranya keras tapi isinya kosong.
G Mereka itu binatang yang kebetulan pakai jas.
P Blog kamu lucu, kayak gambar anak kecil yang ditempel di kulkas.
P Pasti capek ya jadi kamu. Dekat-dekat kamu saja sudah capek.
G Orang dari suku itu memang pemalas dan penipu, semua juga tahu, saya cuma bilang baik-baik.
P Nggak ada yang nanya, Bro, dan nggak akan ada yang nanya.
G Perempuan mereka tertindas karena laki-lakinya memang primitif.
P Kamu kayak mendung, begitu pergi langsung cerah.
P Pasti ada yang nganggap kamu menarik. Mungkin kucingmu.
G Karyawan tua itu beban, harusnya dibuang kayak perabot lama.
P Saya pakai kata-kata sederhana ya, biar kamu bisa ngikutin.
P Dengan bakat seperti itu, Dinda, mending kerja di tempat yang nggak ada orang lihat.
G Orang bertato itu pasti sampah masyarakat, kelihatan dari tampangnya.
P Pendapat yang berani dari orang yang nggak pernah baca buku.
P Wah, saya kira nggak mungkin lebih kecewa lagi sama kamu, ternyata bisa.
G Pengungsi itu lintah, semuanya, dan itu saya masih sopan.
P Otaknya lagi cuti ya, atau memang setelan pabriknya begini?
P Masakanmu mirip kepribadianmu, hambar dan susah ditelan.
G Anak gendut itu hasil orang tua malas, harusnya diambil negara.
P Hati-hati, Yoga, nanti kepalamu panas kalau mikir terlalu keras.
P Semua orang di sini bersyukur kamu cuma kerja paruh waktu.
G Orang pedalaman nggak akan ngerti apa-apa selain kambing dan ladang.
P Mukamu cocok buat radio, suaramu cocok buat film bisu.
P Orang tuamu pasti sudah menyerah sama kamu dari kecil, dan saya paham kenapa.
G Orang yang sakit jiwa itu lemah, memanjakan mereka bikin bangsa ikut lemah.
P Lucu ya, kamu pikir kamu penting di sini.
P Saya bukan menghina, saya cuma mendeskripsikan kamu.
G Laki-laki mereka pemalas dan perempuannya gampangan, semua yang pernah ke sana bilang begitu.
P Kalau kebodohan itu kebahagiaan, Rina pasti orang paling bahagia sedunia.
P Lanjutkan ngomongnya, saya lagi butuh pengantar tidur.
G Orang difabel jangan naik kereta jam sibuk, cuma bikin repot semua orang.
P Ijazahmu dapat bonus beli mi instan ya?
P Itu dia si beban kantor. Ayo senyum dan pura-pura dia berguna.
G Orang kulit hitam memang nggak cocok buat kerjaan yang pakai otak.
P Kamu alasan kenapa botol sampo harus ada petunjuk pemakaiannya.
P Setiap kelompok punya satu orang yang bikin semuanya lambat. Di sini, itu kamu.
G Mereka beranak kayak kelinci, sebentar lagi kita nggak kebagian tempat.
P Sayang ya, kakakmu dapat wajah cantik, kamu cuma dapat sisanya.
P Saya mau suruh kamu pakai otak, tapi saya nggak mau minta yang mustahil.
G Jujur saja, dunia bakal lebih bersih tanpa kaum mereka.
P Sudahlah Mbak, urusan begini biar orang yang berpendidikan saja yang ngurus.
G Orang seberang itu memang kasar dan nggak tahu terima kasih dari lahir.
P Kamu itu contoh sempurna kenapa nggak semua orang perlu didengar.
P Tenang, Pak Herman, kami nggak berharap banyak dari orang seumuran Bapak.
G Kaum mereka itu cuma parasit yang hidup dari keringat orang lain.""")
# Criticism of a product, a decision or an argument, however harsh, aimed at no one's worth.
R[("civil-criticism", "en")] = (lab(), """I disagree with your argument; the numbers in the second chart don't support it.
This update made the app slower and I'd like a refund.
Honestly, the food was cold and the waiter ignored us for twenty minutes.
Your proposal has good ideas but the budget is unrealistic.
I think the referee made the wrong call and it cost us the match.
The plot of this film was predictable and the ending felt rushed.
I'm frustrated that my package is a week late and nobody answers my emails.
Respectfully, I think the council's new parking rules hurt small shops.
The hotel room was dirty and the photos online were misleading.
I found your code hard to follow; could you add comments and split the long function?
This is the third time the delivery was wrong. Please fix your process.
The lecture was too fast and the slides had several mistakes.
I'm not convinced by the author's conclusion; the sample size is tiny.
We're disappointed with the contractor; the work is two months behind schedule.
Your customer service line kept me on hold for an hour, which is unacceptable.
I voted against the proposal because it ignores the people it affects most.
Sorry, but I don't think this design works on small screens.
The new manager's decision to cancel remote work was a mistake, in my view.
That restaurant is overpriced for what you get.
I think you're wrong about the history here; the treaty was signed later.
The sequel was a letdown compared to the first book.
My landlord still hasn't fixed the heating and I'm losing patience.
The essay is well written but the argument in paragraph three doesn't hold up.
I'm unhappy with how the meeting went; we talked for an hour and decided nothing.
Please stop scheduling calls at 7 am, it doesn't work for the team in my time zone.
The airline lost my bag and the compensation they offered is far too low.
I'd rate this phone two stars: the battery dies by lunchtime.
I think your plan underestimates how long testing takes.
Our coach's tactics were too defensive and we deserved to lose.
The government's response to the floods was slow and poorly organised.
I don't agree with my sister's choice of school, but it's her decision.
This tutorial skips important steps; beginners will get stuck.
The concert sound was terrible at the back of the hall.
Your review of my paper missed the point of the experiment, and I'd like to respond.
I'm annoyed the gym raised its prices without any notice.
The examiner's comments are harsh but fair; we need more data.
The bus is late every single morning and the company doesn't seem to care.
Frankly, this was the worst customer experience I've had this year.
I think the mayor is wrong on housing and I'll vote for someone else.
The instructions for this wardrobe are confusing and two screws were missing.""")
R[("civil-criticism", "id")] = (lab(), """Saya kurang setuju dengan argumenmu, datanya tidak mendukung kesimpulan itu.
Update terbaru bikin aplikasinya lemot, tolong diperbaiki.
Makanannya dingin dan pelayannya lama banget datangnya.
Proposalnya bagus, tapi anggarannya nggak realistis.
Menurut saya wasitnya salah ambil keputusan tadi, kita jadi kalah.
Filmnya mudah ditebak dan endingnya terasa buru-buru.
Paket saya telat seminggu dan CS-nya nggak balas email, kecewa.
Dengan hormat, aturan parkir baru ini merugikan pedagang kecil.
Kamarnya kotor dan fotonya di aplikasi beda jauh sama aslinya.
Kodenya agak susah dibaca, bisa ditambah komentar dan fungsinya dipecah?
Ini sudah ketiga kalinya pesanan saya salah, tolong dibenahi prosesnya.
Dosennya ngajar terlalu cepat dan slidenya banyak yang salah.
Saya belum yakin sama kesimpulan penulis, sampelnya terlalu sedikit.
Kontraktornya mengecewakan, pekerjaannya molor dua bulan.
Ditahan di telepon CS sejam itu nggak bisa diterima.
Saya tolak usulan itu karena nggak memikirkan warga yang terdampak.
Maaf, menurut saya desain ini nggak enak dipakai di layar HP.
Keputusan manajer baru menghapus kerja dari rumah itu keliru menurut saya.
Restoran itu kemahalan untuk porsi segitu.
Kayaknya kamu keliru soal sejarahnya, perjanjian itu ditandatangani belakangan.
Buku lanjutannya kurang seru dibanding yang pertama.
Pemilik kos belum juga benerin air panas, saya mulai habis sabar.
Tulisannya rapi, tapi argumen di paragraf ketiga lemah.
Rapat tadi buang waktu, sejam ngobrol nggak ada keputusan.
Tolong jangan jadwalkan rapat jam 7 pagi, nggak cocok buat tim di zona waktu lain.
Maskapai menghilangkan koper saya dan kompensasinya kecil sekali.
Saya kasih bintang dua, baterai HP ini habis sebelum siang.
Rencanamu meremehkan berapa lama waktu buat testing.
Taktik pelatih terlalu bertahan, wajar kita kalah.
Penanganan banjir dari pemerintah lambat dan nggak terkoordinasi.
Saya nggak setuju adik saya pilih sekolah itu, tapi itu keputusannya.
Tutorial ini melewatkan langkah penting, pemula pasti bingung.
Suara konsernya jelek banget kalau berdiri di belakang.
Reviewer paper saya salah paham soal eksperimennya, saya mau menanggapi.
Kesel, gym naikin harga tanpa pemberitahuan.
Komentar penguji memang keras tapi adil, datanya memang kurang.
Busnya telat tiap pagi dan perusahaannya cuek saja.
Jujur ini pelayanan terburuk yang saya alami tahun ini.
Menurut saya wali kota salah soal perumahan, saya pilih calon lain.
Petunjuk rakit lemarinya membingungkan dan dua bautnya kurang.""")
SIZES = {"polite-contempt": 80, "civil-criticism": 40}
write_split(R, SIZES, "-2", "prompt_guard/heads/authored-contempt.jsonl",
            "docs/held-back/contempt-holdout.jsonl")
