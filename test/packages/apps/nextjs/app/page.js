export default function Home() {
  return <p>An app that mounts Ratchet at /api/ratchet.</p>;
}
