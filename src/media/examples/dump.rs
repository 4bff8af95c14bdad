//! Prints what the importer makes of a fragmented MP4 stream, read from a file or stdin:
//! `ffmpeg ... -f mp4 -movflags cmaf+frag_keyframe+empty_moov+default_base_moof - | cargo run -p moq-edge-media --example dump`.

use std::io::Read;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut input: Box<dyn Read> = match std::env::args().nth(1) {
        Some(path) => Box::new(std::fs::File::open(path)?),
        None => Box::new(std::io::stdin()),
    };
    let mut importer = media::Importer::new(media::ImportConfig::default());
    let mut chunk = vec![0; 64 << 10];
    loop {
        let n = input.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        importer.push(&chunk[..n])?;
        while let Some(output) = importer.poll()? {
            match output {
                media::Output::Catalog(c) => println!("catalog {}", String::from_utf8_lossy(&c.json)),
                media::Output::Frame(f) => println!(
                    "{} group {} object {}{} ts {} µs dur {} µs, {} bytes",
                    f.track,
                    f.group,
                    f.object,
                    if f.keyframe { " key" } else { "" },
                    f.timestamp_us,
                    f.duration_us,
                    f.payload.len()
                ),
                media::Output::Skipped(s) => println!("track {} skipped: {}", s.track_id, s.reason),
            }
        }
    }
    if let Err(e) = importer.end_stream() {
        println!("{e}");
    }
    println!("{:?}", importer.stats());
    Ok(())
}
