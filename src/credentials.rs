//! The commands that make credentials: `eddy cert` (a cluster CA and node certificates)
//! and `eddy token` (users' tokens and their token-file entries).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::Args;
use eddy_proto::auth::Tokens;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// Options of `eddy cert`.
#[derive(Debug, Args)]
pub struct CertArgs {
    /// Where to write ca.pem, ca-key.pem and, per node, NAME.pem and NAME-key.pem.
    #[arg(long, default_value = "eddy-certs")]
    out: PathBuf,
    /// Nodes to make certificates for, as NAME or NAME=HOST,HOST,... (the hosts their
    /// certificate is valid for; `localhost` and 127.0.0.1 are always added).
    #[arg(required = true, value_name = "NODE")]
    nodes: Vec<String>,
    /// Valid for this many days.
    #[arg(long, default_value_t = 365)]
    days: u32,
}

/// `eddy cert`: a CA (made once, reused when `out` holds one) and node certificates signed
/// by it, for a test or small cluster.
pub fn cert(args: CertArgs) -> Result<()> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let now = time_now();
    let until = now + std::time::Duration::from_secs(u64::from(args.days) * 86_400);
    let issuer = certificate_authority(&args.out, now, until)?;
    for node in &args.nodes {
        let (name, hosts) = node.split_once('=').unwrap_or((node, ""));
        let mut sans: Vec<String> = hosts
            .split(',')
            .filter(|h| !h.is_empty())
            .map(str::to_string)
            .collect();
        for default in [name, "localhost", "127.0.0.1"] {
            if !sans.iter().any(|s| s == default) {
                sans.push(default.to_string());
            }
        }
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(sans.clone())?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        params.not_before = now.into();
        params.not_after = until.into();
        let cert = params.signed_by(&key, &issuer)?;
        std::fs::write(args.out.join(format!("{name}.pem")), cert.pem())?;
        write_private(
            &args.out.join(format!("{name}-key.pem")),
            &key.serialize_pem(),
        )?;
        eprintln!("{name}: valid for {}", sans.join(", "));
    }
    eprintln!("wrote {}", args.out.display());
    Ok(())
}

/// The CA of `out` (`ca.pem`, `ca-key.pem`), made when it has none.
fn certificate_authority(
    out: &Path,
    now: std::time::SystemTime,
    until: std::time::SystemTime,
) -> Result<Issuer<'static, KeyPair>> {
    let (cert_path, key_path) = (out.join("ca.pem"), out.join("ca-key.pem"));
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, "Eddy cluster CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = now.into();
    params.not_after = until.into();
    let key = match (cert_path.exists(), std::fs::read_to_string(&key_path)) {
        (true, Ok(pem)) => KeyPair::from_pem(&pem).context("ca-key.pem")?,
        (true, Err(e)) => bail!(
            "{} exists but its key {} cannot be read: {e}",
            cert_path.display(),
            key_path.display()
        ),
        (false, _) => {
            let key = KeyPair::generate()?;
            let cert = params.self_signed(&key)?;
            write_private(&key_path, &key.serialize_pem())?;
            std::fs::write(&cert_path, cert.pem())?;
            key
        }
    };
    Ok(Issuer::new(params, key))
}

fn time_now() -> std::time::SystemTime {
    // A minute back, for clocks of other machines slightly behind.
    std::time::SystemTime::now() - std::time::Duration::from_secs(60)
}

/// Writes a private key readable by its owner only.
fn write_private(path: &Path, contents: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(contents.as_bytes())?;
    Ok(())
}

/// Options of `eddy token`.
#[derive(Debug, Args)]
pub struct TokenArgs {
    /// The token's name (shown in logs; limits count per name).
    name: String,
    /// The token may only read jobs, checkpoints and metrics.
    #[arg(long)]
    read_only: bool,
    /// Append the entry (the token's hash, not the token) to this token file.
    #[arg(long, value_name = "FILE")]
    append: Option<PathBuf>,
}

/// `eddy token`: a new random token on standard output; its token-file entry appended to
/// `--append` or printed on standard error.
pub fn token(args: TokenArgs) -> Result<()> {
    let (token, hash) = eddy_proto::auth::generate();
    let flag = if args.read_only { " read-only" } else { "" };
    let entry = format!("{} = {hash}{flag}\n", args.name);
    // The entry must parse (a bad name is caught here, not when a daemon starts).
    Tokens::parse(&entry, "the new entry")?;
    match &args.append {
        Some(path) => {
            use std::io::Write;
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open {}", path.display()))?;
            file.write_all(entry.as_bytes())?;
        }
        None => eprint!("{entry}"),
    }
    println!("{token}");
    Ok(())
}
