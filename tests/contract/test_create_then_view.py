from s3memory import EncryptedMemory


def test_create_then_view(memory: EncryptedMemory) -> None:
    assert memory.create("/memories/a.txt", "hi\n") == "File created successfully at: /memories/a.txt"
    assert (
        memory.view("/memories/a.txt")
        == "Here's the content of /memories/a.txt with line numbers:\n     1\thi\n     2\t"
    )
