//! Starting and stopping a member: storage, state, the Raft thread, peer transport, client
//! listener, metrics endpoint. The one place that wires the layers together.

use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{bail, Context};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::Config;
use crate::net::ClientPort;
use crate::raft::{self, Input, Peers, RaftStorage, Replica};
use crate::state::snapshot;
use crate::state::tree::TreeOptions;
use crate::state::StateMachine;

/// What orders this member's writes.
enum Orderer {
    /// Raft, over the store in dataDir.
    Raft {
        storage: RaftStorage,
        peers: Option<Arc<dyn Peers>>,
        snapshot_load: std::time::Duration,
    },
    /// A ZooKeeper ensemble this member observes (`migrateFromZooKeeper`).
    Zab(crate::zab::Resume),
}

/// A running member.
pub struct Server {
    shared: Arc<ClientPort>,
    pub client_addr: SocketAddr,
    raft_thread: Option<JoinHandle<()>>,
    shutdown: watch::Sender<bool>,
}

/// Where the member keeps its Raft log and snapshots, inside dataDir (which also holds
/// `myid`, as ZooKeeper's does).
pub fn raft_dir(config: &Config) -> std::path::PathBuf {
    config.data_dir.join("raft")
}

/// Binds the AdminServer's port (ZooKeeper's 8080 unless `admin.serverPort` says otherwise).
/// A port given in zoo.cfg that cannot be had stops the start, as any other port would; the
/// default one taken by something else is a warning, so a server started with no
/// configuration on a machine already using 8080 still serves its clients.
async fn bind_admin(
    config: &Config,
) -> anyhow::Result<Option<(TcpListener, crate::ops::admin::Mode)>> {
    let admin = &config.admin;
    if !admin.enabled {
        return Ok(None);
    }
    let mode = crate::ops::admin::mode(config).context("admin.portUnification/forceHttps")?;
    let addr = SocketAddr::new(admin.address, admin.port());
    match TcpListener::bind(addr).await {
        Ok(l) => {
            tracing::info!(address = %l.local_addr()?, "AdminServer listening");
            Ok(Some((l, mode)))
        }
        Err(e) if admin.port_given.is_none() => {
            tracing::warn!(
                "AdminServer not started: cannot listen on {addr} ({e}); set admin.serverPort, \
                 or admin.enableServer=false"
            );
            Ok(None)
        }
        Err(e) => Err(e).with_context(|| format!("cannot listen for admin requests on {addr}")),
    }
}

impl Server {
    /// Opens the data directory, replays what it holds, and starts serving. Must be called
    /// inside a tokio runtime.
    pub async fn start(mut config: Config) -> anyhow::Result<Server> {
        if config.migrate_from_zookeeper {
            match crate::zab::cut_over_members(&config)? {
                // It cut over from the ZooKeeper ensemble: it is a member of the Raft
                // ensemble of the zooraft members now.
                Some(members) => {
                    tracing::info!(
                        ?members,
                        "this member cut over from ZooKeeper (dataDir/zab/cutover): running Raft"
                    );
                    config = crate::zab::raft_config(&config, &members);
                }
                None => return Self::start_observing(config).await,
            }
        }
        let conf = raft::initial_membership(&config);
        let dir = raft_dir(&config);
        let options = TreeOptions {
            extended_types: config.extended_types,
        };
        // The snapshot decodes while the store reads its log.
        let load = move |src| {
            let started = std::time::Instant::now();
            (snapshot::decode_from(src, options), started.elapsed())
        };
        let (storage, loaded) = RaftStorage::open_loading(&dir, conf.clone(), Some(load))
            .with_context(|| format!("cannot use data directory {}", dir.display()))?;
        let stored = storage.conf_state();
        // With reconfig the committed membership rules, and zoo.cfg's is only the first one.
        if !config.reconfig_enabled && !raft::same_membership(&stored, &conf) {
            bail!(
                "the membership in the configuration (voters {:?}, observers {:?}) differs from the one \
                 recorded in {} (voters {:?}, observers {:?}); change the membership with reconfigEnabled=true and reconfig",
                conf.voters,
                conf.learners,
                dir.display(),
                stored.voters,
                stored.learners
            );
        }
        let (state, snapshot_load) = match loaded {
            Some((decoded, took)) => (
                decoded.with_context(|| {
                    format!(
                        "cannot load the snapshot in {} (corrupt, or written by another build)",
                        dir.display()
                    )
                })?,
                took,
            ),
            // A member that cut over from ZooKeeper starts from its copy of the ensemble
            // until its store has a snapshot of its own.
            None => match crate::zab::base_state(&config)? {
                Some(state) => (state, std::time::Duration::ZERO),
                None => (StateMachine::new(options), std::time::Duration::ZERO),
            },
        };
        tracing::info!(
            ms = snapshot_load.as_millis() as u64,
            znodes = state.tree.node_count(),
            "snapshot loaded"
        );
        // What loading it took and freed is free in the middle of the heap: give it back.
        crate::allocator::give_back_in_background("loading the snapshot");
        let (tx, rx) = std::sync::mpsc::channel();
        let me = config.my_id;
        let client_addr = match config.members.get(&me).and_then(|m| m.client_port) {
            Some(port) if !config.is_standalone() => SocketAddr::new(config.client_address, port),
            _ => config.client_addr(),
        };
        let transport = raft::start_transport(&config, &storage, tx.clone()).await?;
        let orderer = Orderer::Raft {
            storage,
            peers: transport.map(|t| Arc::new(t) as Arc<dyn Peers>),
            snapshot_load,
        };
        Self::serve(config, state, client_addr, (tx, rx), orderer).await
    }

    /// A member that observes a ZooKeeper ensemble (`migrateFromZooKeeper`): it starts
    /// from its own copy of the ensemble (`dataDir/zab`), or empty, and takes the rest
    /// from the ensemble's leader.
    async fn start_observing(config: Config) -> anyhow::Result<Server> {
        match config.members.get(&config.my_id) {
            Some(m) if m.observer => {}
            Some(_) => bail!(
                "migrateFromZooKeeper: this member's line server.{} must end in :observer (it joins the ZooKeeper ensemble as an observer)",
                config.my_id
            ),
            None => bail!(
                "migrateFromZooKeeper: there is no server.{} line for this member (myid {})",
                config.my_id,
                config.my_id
            ),
        }
        let client_addr = match config
            .members
            .get(&config.my_id)
            .and_then(|m| m.client_port)
        {
            Some(port) => SocketAddr::new(config.client_address, port),
            None => config.client_addr(),
        };
        let (state, resume) = crate::zab::recover(&config)?;
        let channel = std::sync::mpsc::channel();
        Self::serve(config, state, client_addr, channel, Orderer::Zab(resume)).await
    }

    /// Binds the client, admin and metrics ports and starts the thread that orders writes.
    async fn serve(
        config: Config,
        state: StateMachine,
        client_addr: SocketAddr,
        (tx, rx): (
            std::sync::mpsc::Sender<Input>,
            std::sync::mpsc::Receiver<Input>,
        ),
        orderer: Orderer,
    ) -> anyhow::Result<Server> {
        let me = config.my_id;
        let listeners = crate::net::bind_client_ports(&config, client_addr).await?;
        let client_addr = match listeners.first() {
            Some((l, _)) => l.local_addr()?,
            None => bail!("no client port to listen on"),
        };
        let metrics_port = config.metrics_port;
        let metrics_addr = config.metrics_address;
        let admin = bind_admin(&config).await?;
        let replica = Arc::new(Replica::new(config, state, tx));
        // What the member starts from stands for ZooKeeper's snapshot at start.
        replica.status.snapshot_named(replica.last_zxid());
        let shared = Arc::new(ClientPort::new(
            replica.clone(),
            crate::ops::four_letter::answer,
        ));
        let thread = match orderer {
            Orderer::Raft {
                storage,
                peers,
                snapshot_load,
            } => {
                replica.counters.snap_load_time.record_ms(snapshot_load);
                // (Detached: it ends by itself once the replica is dropped.)
                let _ = crate::allocator::give_back_when_quiet(
                    Arc::downgrade(&replica),
                    |r| {
                        r.counters
                            .commits
                            .load(std::sync::atomic::Ordering::Relaxed)
                    },
                    storage.memtable_flusher(),
                );
                raft::start(replica, shared.clone(), storage, rx, None, peers)
                    .context("cannot start Raft")?
            }
            Orderer::Zab(resume) => crate::zab::start(replica, shared.clone(), rx, resume)
                .context("cannot start observing the ZooKeeper ensemble")?,
        };
        let (shutdown, shutdown_rx) = watch::channel(false);
        if let Some((listener, mode)) = admin {
            tokio::spawn(crate::ops::admin::serve(
                shared.clone(),
                listener,
                mode,
                shutdown_rx.clone(),
            ));
        }
        for (listener, listen) in listeners {
            tokio::spawn(crate::net::accept_clients(
                shared.clone(),
                listener,
                listen,
                shutdown_rx.clone(),
            ));
        }
        if let Some(port) = metrics_port {
            let addr = SocketAddr::new(metrics_addr, port);
            let l = TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen for metrics on {addr}"))?;
            tokio::spawn(crate::ops::prometheus::serve(
                shared.clone(),
                l,
                shutdown_rx,
            ));
        }
        tracing::info!(member = me, %client_addr, "zooraft started");
        Ok(Server {
            shared,
            client_addr,
            raft_thread: Some(thread),
            shutdown,
        })
    }

    /// Stops accepting clients, closes connections, and stops Raft (whatever was
    /// acknowledged is already on disk). A leader first hands leadership over to its most
    /// up-to-date follower, so the others need not wait out an election timeout.
    pub async fn stop(mut self) {
        self.hand_over().await;
        let _ = self.shutdown.send(true);
        self.shared.replica.submit(Input::Shutdown);
        if let Some(thread) = self.raft_thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
        tracing::info!("zooraft stopped");
    }

    /// Leader transfer before a clean shutdown; waits at most two election timeouts (raft-rs
    /// gives up on a transfer after one).
    async fn hand_over(&self) {
        let replica = &self.shared.replica;
        if !replica.config().transfer_on_shutdown
            || replica.status.role() != raft::Role::Leader
            || !replica.submit(Input::TransferLeader(raft::Transfer::Yield))
        {
            return;
        }
        let deadline = tokio::time::Instant::now() + replica.election_timeouts(2);
        while tokio::time::Instant::now() < deadline {
            let leader = replica
                .status
                .leader
                .load(std::sync::atomic::Ordering::Relaxed);
            if leader != replica.me && leader != 0 {
                tracing::info!("leadership handed over to {leader}");
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        tracing::warn!("leadership was not handed over; stopping anyway");
    }
}
