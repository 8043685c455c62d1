"""SGLang reference package level (mirrors sglang's layout)."""
